package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// wholeRow is a target row of TestHistoryWholeProperty: NULL is "∅", as
// rows() prints it.
type wholeRow struct{ id, v string }

func (r wholeRow) sql() string {
	lit := func(s, typ string) string {
		if s == "∅" {
			return "CAST(NULL AS " + typ + ")"
		}
		if typ == "VARCHAR" {
			return "'" + s + "'"
		}
		return s
	}
	return "(" + lit(r.id, "INTEGER") + ", " + lit(r.v, "VARCHAR") + ")"
}

// histRow is a history row as the fold expects it: a row and the snapshots
// it began and ended in (to 0: open).
type histRow struct {
	wholeRow
	from, to int64
}

func (h histRow) String() string {
	to := "∅"
	if h.to != 0 {
		to = fmt.Sprint(h.to)
	}
	return fmt.Sprintf("%s|%s|%d|%s", h.id, h.v, h.from, to)
}

// foldWhole is the history that the whole comparison must keep, folded
// from the targets of snapshots 1..n alone: at each snapshot, a row whose
// target copies fall below its open copies has that many open copies
// closed, the ones that began latest first; a row with more target copies
// than open ones has the difference opened.
func foldWhole(states [][]wholeRow) []string {
	var hist []histRow
	for i, state := range states {
		s := int64(i + 1)
		want := map[wholeRow]int{}
		for _, r := range state {
			want[r]++
		}
		open := map[wholeRow][]int{} // indexes into hist, latest first
		for k := len(hist) - 1; k >= 0; k-- {
			if hist[k].to == 0 {
				open[hist[k].wholeRow] = append(open[hist[k].wholeRow], k)
			}
		}
		for r, idx := range open {
			slices.SortStableFunc(idx, func(a, b int) int { return int(hist[b].from - hist[a].from) })
			for _, k := range idx[:max(len(idx)-want[r], 0)] {
				hist[k].to = s
			}
		}
		for r, n := range want {
			for range n - len(open[r]) {
				hist = append(hist, histRow{r, s, 0})
			}
		}
	}
	out := make([]string, len(hist))
	for i, h := range hist {
		out[i] = h.String()
	}
	slices.Sort(out)
	return out
}

// TestHistoryWholeProperty records random targets of a job without a key
// (a model's rebuild: no idem_touched), with repeated rows and NULLs,
// and checks the history rows against an independent fold (foldWhole) and
// the pinned read of every snapshot against its target. The default run
// is short; IDEM_LONG=1 runs 300 scenarios.
func TestHistoryWholeProperty(t *testing.T) {
	t.Parallel()
	scenarios := 6
	if os.Getenv("IDEM_LONG") == "1" {
		scenarios = 300
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	db := newCatalog(t)
	for i := range scenarios {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		j := fmt.Sprintf("p%d", i)
		table := "t" + j
		exec(t, db, "CREATE TABLE "+table+" (id INTEGER, v VARCHAR)")
		pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
		var states [][]wholeRow
		for s := int64(1); s <= 6; s++ {
			var state []wholeRow
			if s > 1 && rng.IntN(4) == 0 {
				state = slices.Clone(states[s-2]) // nothing changed
			} else {
				for range rng.IntN(6) {
					state = append(state, wholeRow{pick("1", "2", "∅"), pick("a", "b", "∅")})
				}
			}
			states = append(states, state)
			tx := begin(t, db)
			exec(t, tx, "DELETE FROM "+table)
			if len(state) > 0 {
				vals := make([]string, len(state))
				for k, r := range state {
					vals[k] = r.sql()
				}
				exec(t, tx, "INSERT INTO "+table+" VALUES "+strings.Join(vals, ", "))
			}
			_, err := RecordHistory(ctx, tx, testJob(j, table), s)
			require.NoError(t, err, "scenario %d (seed %d), snapshot %d", i, seed, s)
			require.NoError(t, tx.Commit())
		}
		require.Equal(t, foldWhole(states), rows(t, db, "SELECT id, v, idem_from, idem_to FROM "+HistoryTable(j)+" ORDER BY ALL"),
			"scenario %d (seed %d): history of targets %v", i, seed, states)
		cols := []TargetColumn{{Name: "id", Type: "INTEGER"}, {Name: "v", Type: "VARCHAR"}}
		for s := int64(1); s <= 6; s++ {
			want := []string{}
			for _, r := range states[s-1] {
				want = append(want, r.id+"|"+r.v)
			}
			slices.Sort(want)
			q, err := PinnedSelect(ctx, db, j, cols, s)
			require.NoError(t, err)
			got := rows(t, db, q)
			slices.Sort(got)
			require.Equal(t, want, got, "scenario %d (seed %d): pinned read of snapshot %d of targets %v", i, seed, s, states)
		}
	}
}

// TestHistoryPastARowGroup: a history made in a run that writes more than
// a row group (122,880 rows) is read whole by the next run in the same
// process before any checkpoint, on two threads, with the target's column
// types. On DuckDB 2.0 a table made by CREATE TABLE AS ... LIMIT 0 and
// filled in the same transaction reads empty in such a statement, and
// every row was opened again.
func TestHistoryPastARowGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("duckdb", "?threads=2")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	require.NoError(t, Migrate(ctx, db, "mem", nil))
	j := testJob("big", "t")
	for s := int64(1); s <= 2; s++ {
		tx := begin(t, db)
		if s == 1 {
			exec(t, tx, `CREATE TABLE t AS SELECT i AS id, CAST(i AS DECIMAL(38,2)) AS amount, [i, 2] AS l, {'a b': 'x'} AS st FROM range(130000) r(i)`)
		} else {
			exec(t, tx, `UPDATE t SET amount = 0 WHERE id = 7`)
		}
		_, err := RecordHistory(ctx, tx, j, s)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
	}
	require.Equal(t, []string{"1|2|1", "1|∅|129999", "2|∅|1"},
		rows(t, db, `SELECT idem_from, idem_to, count(*) FROM idem.big__history GROUP BY ALL ORDER BY ALL`))
	require.Equal(t, rows(t, db, `SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 't' ORDER BY column_index`),
		rows(t, db, `SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'big__history' AND column_name NOT LIKE 'idem_%' ORDER BY column_index`))
}

// TestHistoryFewerCopies: a row the target holds fewer copies of keeps as
// many open as the target holds, also when a column named rowid hides
// DuckDB's row ids.
func TestHistoryFewerCopies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)
	for _, col := range []string{"id", "rowid"} {
		table := "t_" + col
		exec(t, db, "CREATE TABLE "+table+" ("+col+" INTEGER, v VARCHAR)")
		states := []string{"(1, 'a'), (1, 'a'), (1, 'a'), (2, NULL)", "(1, 'a'), (2, NULL)", "(1, 'a'), (1, 'a'), (2, NULL)"}
		for i, state := range states {
			tx := begin(t, db)
			exec(t, tx, "DELETE FROM "+table, "INSERT INTO "+table+" VALUES "+state)
			_, err := RecordHistory(ctx, tx, testJob(table, table), int64(i+1))
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
		}
		cols := []TargetColumn{{Name: col, Type: "INTEGER"}, {Name: "v", Type: "VARCHAR"}}
		for i, want := range [][]string{{"1|a", "1|a", "1|a", "2|∅"}, {"1|a", "2|∅"}, {"1|a", "1|a", "2|∅"}} {
			q, err := PinnedSelect(ctx, db, table, cols, int64(i+1))
			require.NoError(t, err)
			require.Equal(t, want, rows(t, db, q+" ORDER BY ALL"), "%s: snapshot %d", table, i+1)
		}
	}
	require.Equal(t, []string{"1|a|1|2", "1|a|1|2", "1|a|1|∅", "1|a|3|∅", "2|∅|1|∅"},
		rows(t, db, `SELECT id, v, idem_from, idem_to FROM idem.t_id__history ORDER BY ALL`))
}
