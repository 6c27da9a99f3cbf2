package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

// historyStates are the target of one job (key id) at snapshots 1..6: an
// update and an insert, a delete, the deleted key back with a new value,
// a delete and an update, and a snapshot that changes nothing.
var historyStates = []map[int]string{
	1: {1: "a", 2: "b", 3: "c"},
	2: {1: "a", 2: "B", 3: "c", 4: "d"},
	3: {1: "a", 2: "B", 4: "d"},
	4: {1: "a", 2: "B", 3: "C", 4: "d"},
	5: {2: "B2", 3: "C", 4: "d"},
	6: {2: "B2", 3: "C", 4: "d"},
}

const lastSnapshot = 6

// historyMode says how each snapshot is recorded: whether the steps left
// idem_touched (the keys they changed), and the key the job has then. (A
// job without a key records as "closed rows" does, touched or not.)
type historyMode struct {
	name    string
	touched func(s int64) bool
	key     func(s int64) []string
}

var historyModes = []historyMode{
	{name: "closed rows", touched: func(int64) bool { return false }, key: func(int64) []string { return []string{"id"} }},
	{name: "appended rows", touched: func(int64) bool { return true }, key: func(int64) []string { return []string{"id"} }},
	{name: "appended, then compared with S-1", touched: func(s int64) bool { return s == 1 }, key: func(int64) []string { return []string{"id"} }},
	{name: "closed, then appended from 3", touched: func(s int64) bool { return s >= 3 }, key: func(int64) []string { return []string{"id"} }},
	{name: "appended, then the key dropped at 4", touched: func(s int64) bool { return s < 4 },
		key: func(s int64) []string { return map[bool][]string{true: {"id"}, false: nil}[s < 4] }},
}

// changedAt reports whether key k's row changed at snapshot s (appeared,
// went, or took another value).
func changedAt(k int, s int64) bool {
	prev := map[int]string{}
	if s > 1 {
		prev = historyStates[s-1]
	}
	a, inA := prev[k]
	b, inB := historyStates[s][k]
	return inA != inB || a != b
}

// recordHistory writes the target of every snapshot and records its
// history as mode says, one transaction per snapshot.
func recordHistory(t *testing.T, db *sql.DB, mode historyMode) {
	t.Helper()
	ctx := context.Background()
	exec(t, db, `CREATE TABLE t (id INTEGER, v VARCHAR)`)
	for s := int64(1); s <= lastSnapshot; s++ {
		tx := begin(t, db)
		exec(t, tx, `DELETE FROM t`, `DROP TABLE IF EXISTS idem_touched`)
		for _, k := range slices.Sorted(maps.Keys(historyStates[s])) {
			_, err := tx.ExecContext(ctx, `INSERT INTO t VALUES (?, ?)`, k, historyStates[s][k])
			require.NoError(t, err)
		}
		if mode.touched(s) {
			exec(t, tx, `CREATE TEMP TABLE idem_touched (id INTEGER)`)
			for k := 1; k <= 4; k++ {
				if changedAt(k, s) {
					// Each changed key twice: a commit step may name a key
					// more than once, and history counts it once.
					for range 2 {
						_, err := tx.ExecContext(ctx, `INSERT INTO idem_touched VALUES (?)`, k)
						require.NoError(t, err)
					}
				}
			}
		}
		touched, err := RecordHistory(ctx, tx, testJob("j", "t", mode.key(s)...), s)
		require.NoError(t, err, "snapshot %d", s)
		want := int64(-1) // not counted: history compared rows instead
		if mode.touched(s) && len(mode.key(s)) > 0 {
			want = 0
			for k := 1; k <= 4; k++ {
				if changedAt(k, s) {
					want++
				}
			}
		}
		require.Equal(t, want, touched, "snapshot %d: distinct touched keys", s)
		require.NoError(t, tx.Commit())
	}
	exec(t, db, `DROP TABLE IF EXISTS idem_touched`)
}

var historyCols = []TargetColumn{{Name: "id", Type: "INTEGER"}, {Name: "v", Type: "VARCHAR"}}

func pinnedRows(t *testing.T, db *sql.DB, s int64) []string {
	t.Helper()
	q, err := PinnedSelect(context.Background(), db, "j", historyCols, s)
	require.NoError(t, err)
	return rows(t, db, q+" ORDER BY ALL")
}

func stateRows(s int64) []string {
	out := []string{}
	for _, k := range slices.Sorted(maps.Keys(historyStates[s])) {
		out = append(out, fmt.Sprintf("%d|%s", k, historyStates[s][k]))
	}
	return out
}

// wantChanges is what ChangesSelect must return between from and to: the
// rows valid at to whose key changed in (from, to]; with a key, the keys
// gone with their values at from; without one, every row valid at from
// that a change in (from, to] closed.
func wantChanges(from, to int64, keyed bool) []string {
	at := func(s int64) map[int]string {
		if s == 0 {
			return map[int]string{}
		}
		return historyStates[s]
	}
	changed := func(k int) bool {
		for s := from + 1; s <= to; s++ {
			if changedAt(k, s) {
				return true
			}
		}
		return false
	}
	// In ChangesSelect's order: by key, then (without a key) by value and
	// operation.
	out := []string{}
	for k := 1; k <= 4; k++ {
		v, inTo := at(to)[k]
		old, inFrom := at(from)[k]
		var rows [][2]string
		if inTo && changed(k) {
			rows = append(rows, [2]string{v, "upsert"})
		}
		if inFrom && ((keyed && !inTo) || (!keyed && changed(k))) {
			rows = append(rows, [2]string{old, "delete"})
		}
		slices.SortFunc(rows, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
		for _, r := range rows {
			out = append(out, fmt.Sprintf("%d|%s|%s", k, r[0], r[1]))
		}
	}
	return out
}

// TestHistory records one job's history in each of the ways RecordHistory
// keeps it and checks every pinned read, the changes between every two
// snapshots (with and without a key), ClosedHistoryRows against what
// ExpireHistory deletes, and that expiry and CloseHistory leave every
// kept snapshot's rows as they were.
func TestHistory(t *testing.T) {
	t.Parallel()
	for _, mode := range historyModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := newCatalog(t)
			recordHistory(t, db, mode)

			for s := int64(1); s <= lastSnapshot; s++ {
				require.Equal(t, stateRows(s), pinnedRows(t, db, s), "pinned read of snapshot %d", s)
			}
			require.Empty(t, pinnedRows(t, db, 0))
			for from := int64(0); from < lastSnapshot; from++ {
				for to := from + 1; to <= lastSnapshot; to++ {
					for _, key := range [][]string{{"id"}, nil} {
						q, err := ChangesSelect(ctx, db, "j", historyCols, key, from, to)
						require.NoError(t, err)
						require.Equal(t, wantChanges(from, to, key != nil), rows(t, db, q), "changes (%d, %d] by key %v", from, to, key)
					}
				}
			}

			byClose, err := ClosedHistoryRows(ctx, db, "j")
			require.NoError(t, err)
			total := one[int64](t, db, `SELECT count(*) FROM idem.j__history`)
			var gone int64
			for k := int64(1); k <= lastSnapshot; k++ {
				gone += byClose[k]
				tx := begin(t, db)
				require.NoError(t, ExpireHistory(ctx, tx, "j", k))
				require.NoError(t, tx.Commit())
				require.Equal(t, total-gone, one[int64](t, db, `SELECT count(*) FROM idem.j__history`), "expired before %d", k)
				for _, s := range []int64{k, min(k+1, lastSnapshot), lastSnapshot} {
					require.Equal(t, stateRows(s), pinnedRows(t, db, s), "pinned read of snapshot %d after expiry before %d", s, k)
				}
				if k == 3 {
					// Closing appended rows changes no read either.
					tx := begin(t, db)
					require.NoError(t, CloseHistory(ctx, tx, "j"))
					require.NoError(t, tx.Commit())
					f, err := readHistoryFormat(ctx, db, "j")
					require.NoError(t, err)
					require.Nil(t, f)
					require.Zero(t, one[int64](t, db, `SELECT count(*) FROM idem.j__history WHERE idem_to = idem_from`), "markers left")
					byClose, err = ClosedHistoryRows(ctx, db, "j")
					require.NoError(t, err)
					total, gone = one[int64](t, db, `SELECT count(*) FROM idem.j__history`), 0
					for s := int64(1); s <= k; s++ {
						gone += byClose[s]
					}
					require.Zero(t, gone, "closing made rows expirable below the oldest kept")
				}
			}
			// Only the last snapshot's rows are left, open.
			require.Equal(t, stateRows(lastSnapshot), rows(t, db, `SELECT id, v FROM idem.j__history WHERE idem_to IS NULL ORDER BY ALL`))
		})
	}
}

// TestHistorySchemaChange: a column added to the target is added to the
// history (NULL in older rows); a column retyped (twice) is kept as text
// there, and every snapshot reads its own type back with exactly its
// values, through pinned reads and changes; a retyped key column is
// refused (exit 3) and nothing changes.
func TestHistorySchemaChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, appended := range []bool{false, true} {
		t.Run(fmt.Sprintf("appended=%v", appended), func(t *testing.T) {
			t.Parallel()
			db := newCatalog(t)
			j := testJob("j", "t", "id")
			record := func(s int64) error {
				tx := begin(t, db)
				if appended {
					// The steps name the keys they wrote (RecordHistory).
					if _, err := tx.ExecContext(ctx, `CREATE OR REPLACE TEMP TABLE idem_touched AS SELECT id FROM t`); err != nil {
						return err
					}
				}
				if _, err := RecordHistory(ctx, tx, j, s); err != nil {
					require.NoError(t, tx.Rollback())
					return err
				}
				return tx.Commit()
			}
			exec(t, db, `CREATE TABLE t (id INTEGER, v VARCHAR)`, `INSERT INTO t VALUES (1, 'a'), (2, 'b')`)
			require.NoError(t, record(1))
			exec(t, db, `ALTER TABLE t ADD COLUMN w DOUBLE`, `UPDATE t SET w = 0.1::DOUBLE + 0.2::DOUBLE * id`)
			require.NoError(t, record(2))
			exec(t, db, `ALTER TABLE t ALTER w TYPE DECIMAL(10,3)`, `UPDATE t SET w = w + 1 WHERE id = 2`)
			require.NoError(t, record(3))
			exec(t, db, `ALTER TABLE t ALTER w TYPE DOUBLE`, `UPDATE t SET w = 1e300 WHERE id = 1`)
			require.NoError(t, record(4))
			colsAt := func(wType string) []TargetColumn {
				c := slices.Clone(historyCols)
				if wType != "" {
					c = append(c, TargetColumn{Name: "w", Type: wType})
				}
				return c
			}
			for _, tc := range []struct {
				s     int64
				wType string
				want  []string
			}{
				{1, "", []string{"1|a", "2|b"}},
				{2, "DOUBLE", []string{"1|a|0.30000000000000004", "2|b|0.5"}},
				{3, "DECIMAL(10,3)", []string{"1|a|0.3", "2|b|1.5"}},
				{4, "DOUBLE", []string{"1|a|1e+300", "2|b|1.5"}},
			} {
				q, err := PinnedSelect(ctx, db, "j", colsAt(tc.wType), tc.s)
				require.NoError(t, err)
				require.Equal(t, tc.want, rows(t, db, q+" ORDER BY ALL"), "snapshot %d", tc.s)
				if tc.wType != "" {
					require.Equal(t, []string{tc.wType}, rows(t, db, "SELECT DISTINCT typeof(w) FROM ("+q+")"), "snapshot %d reads its own type", tc.s)
				}
			}
			// The changes from 2 to 3 read as snapshot 3 recorded its columns.
			q, err := ChangesSelect(ctx, db, "j", colsAt("DECIMAL(10,3)"), []string{"id"}, 2, 3)
			require.NoError(t, err)
			require.Equal(t, []string{"1|a|0.3|upsert", "2|b|1.5|upsert"}, rows(t, db, q))
			// A key column keeps its type.
			before := rows(t, db, `SELECT * FROM idem.j__history ORDER BY ALL`)
			exec(t, db, `ALTER TABLE t ALTER id TYPE BIGINT`)
			err = record(5)
			require.ErrorIs(t, err, report.ErrRefused)
			require.ErrorContains(t, err, "schema change turns key column id of j from INTEGER into BIGINT")
			require.Equal(t, before, rows(t, db, `SELECT * FROM idem.j__history ORDER BY ALL`))
		})
	}
}
