package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/pipelines"
)

// writeJob writes a job file into dir and loads it.
func writeJob(t *testing.T, dir, text string) *job.Job {
	t.Helper()
	path := filepath.Join(dir, "job.toml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	j, err := LoadJob(path, pipelines.FS)
	require.NoError(t, err)
	return j
}

// testThreads is the DuckDB threads of the tests' databases: one by
// default, since tests run side by side; two with IDEM_LONG=1, so that the
// long runs also see DuckDB's parallel plans.
func testThreads() int {
	if os.Getenv("IDEM_LONG") == "1" {
		return 2
	}
	return 1
}

func openTestDB(t *testing.T, dir string) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(dir, "idem.duckdb"), OpenOptions{DuckDB: job.DuckDBSettings{Threads: testThreads()}})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// mbkJob is a merge_by_key job over columns k (key), o (ordering, when
// ordered), v and n, with two quality rules.
func mbkJob(ordered bool) string {
	order := ""
	if ordered {
		order = `order_by = "o"`
	}
	return `
name = "things"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1

[input]
format = "jsonl"

[input.columns]
k = "BIGINT"
o = "BIGINT"
v = "VARCHAR"
n = "INTEGER"

[target]
key = ["k"]
` + order + `

[[quality.rules]]
name = "n_nonneg"
sql = "n >= 0"

[[quality.rules]]
name = "v_not_bad"
sql = "v <> 'bad'"
`
}

// mbkRow is one input row; nil means JSON null, nType a value that does not
// cast to INTEGER.
type mbkRow struct {
	k, o, n *int64
	v       *string
	nBad    bool
}

func (r mbkRow) json() string {
	m := map[string]any{"k": nil, "o": nil, "v": nil, "n": nil}
	if r.k != nil {
		m["k"] = *r.k
	}
	if r.o != nil {
		m["o"] = *r.o
	}
	if r.v != nil {
		m["v"] = *r.v
	}
	if r.n != nil {
		m["n"] = *r.n
	}
	if r.nBad {
		m["n"] = "x"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (r mbkRow) raw() string {
	s := func(p *int64) string {
		if p == nil {
			return "NULL"
		}
		return strconv.FormatInt(*p, 10)
	}
	v := "NULL"
	if r.v != nil {
		v = *r.v
	}
	n := s(r.n)
	if r.nBad {
		n = "x"
	}
	return fmt.Sprintf("%s|%s|%s|%s", s(r.k), s(r.o), v, n)
}

// mbkStored is one key's row in the reference fold.
type mbkStored struct {
	o      *int64
	v      *string
	n      *int64
	status string
}

func ptr[T any](v T) *T { return &v }

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// foldBatch is the reference: an independent, row-by-row Go statement of
// merge_by_key's contract. It returns each row's outcome and updates state.
func foldBatch(state map[int64]*mbkStored, rows []mbkRow, ordered bool) []string {
	out := make([]string, len(rows))
	ord := func(r mbkRow) *int64 {
		if ordered {
			return r.o
		}
		return nil
	}
	less := func(a, b *int64) bool { return a != nil && b != nil && *a < *b }
	// Checks in the contract's order.
	for i, r := range rows {
		switch {
		case r.nBad:
			out[i] = "invalid_type:n"
		case r.k == nil:
			out[i] = "invalid_key"
		case ordered && r.o == nil:
			out[i] = "invalid_order"
		case r.n == nil || *r.n < 0:
			out[i] = "invalid_rule:n_nonneg"
		case r.v == nil || *r.v == "bad":
			out[i] = "invalid_rule:v_not_bad"
		}
	}
	// Per key: the highest ordering value and its distinct variants (every
	// valid row is at the same "value" without an ordering column).
	type variant struct {
		o, n *int64
		v    *string
	}
	best := map[int64][]variant{}
	top := map[int64]*int64{}
	var keys []int64
	for i, r := range rows {
		if out[i] == "" {
			if _, ok := top[*r.k]; !ok {
				keys = append(keys, *r.k)
				top[*r.k] = ord(r)
			}
			if less(top[*r.k], ord(r)) {
				top[*r.k] = ord(r)
			}
		}
	}
	for i, r := range rows {
		if out[i] != "" || !eqPtr(ord(r), top[*r.k]) {
			continue
		}
		cand := variant{o: r.o, n: r.n, v: r.v}
		if !slices.ContainsFunc(best[*r.k], func(x variant) bool {
			return eqPtr(x.o, cand.o) && eqPtr(x.n, cand.n) && eqPtr(x.v, cand.v)
		}) {
			best[*r.k] = append(best[*r.k], cand)
		}
	}
	decision := map[int64]string{}
	for _, k := range keys {
		vs := best[k]
		conflict := len(vs) > 1
		st := state[k]
		var d string
		write := false
		switch {
		case st == nil || !ordered || *vs[0].o > *st.o:
			d, write = "accepted", true
			if conflict {
				d = "conflict"
			}
		case *vs[0].o < *st.o:
			d = "stale"
		case st.status == "conflict" || conflict:
			d = "conflict"
			write = st.status != "conflict"
		case eqPtr(vs[0].v, st.v) && eqPtr(vs[0].n, st.n):
			d = "duplicate"
		default:
			d, write = "conflict", true
		}
		decision[k] = d
		if write {
			switch {
			case d != "conflict":
				state[k] = &mbkStored{o: vs[0].o, v: vs[0].v, n: vs[0].n, status: "active"}
			case ordered:
				state[k] = &mbkStored{o: vs[0].o, status: "conflict"}
			default: // without ordering, o is payload too
				state[k] = &mbkStored{status: "conflict"}
			}
		}
	}
	for i, r := range rows {
		if out[i] != "" {
			continue
		}
		if ordered && less(r.o, top[*r.k]) {
			out[i] = "superseded_in_batch"
		} else {
			out[i] = decision[*r.k]
		}
	}
	return out
}

func randomBatch(rng *rand.Rand) []mbkRow {
	n := rng.IntN(9)
	rows := make([]mbkRow, n)
	for i := range rows {
		r := mbkRow{k: ptr(int64(rng.IntN(5))), o: ptr(int64(1 + rng.IntN(4))), v: ptr([]string{"a", "b", "bad"}[rng.IntN(3)]), n: ptr(int64(rng.IntN(3)))}
		switch rng.IntN(14) {
		case 0:
			r.k = nil
		case 1:
			r.o = nil
		case 2:
			r.nBad = true
		case 3:
			r.n = ptr(int64(-1))
		case 4:
			r.n = nil
		case 5:
			r.v = nil
		}
		if r.v != nil && *r.v == "bad" && rng.IntN(3) > 0 {
			r.v = ptr("a")
		}
		rows[i] = r
	}
	return rows
}

// TestMergeByKeyMatchesFold applies random batches to merge_by_key jobs
// (ordered and not, transforms v1 and v2) and checks every row's outcome and
// the target against a Go fold. Two seeds per case by default, 200 with
// IDEM_LONG=1 (docs/reliability.md).
func TestMergeByKeyMatchesFold(t *testing.T) {
	t.Parallel()
	seeds := 2
	if os.Getenv("IDEM_LONG") == "1" {
		seeds = 200
	}
	// Transform v2 (deletes from an upstream) reads every row of a file as
	// an upsert: on files it must keep v1's contract exactly.
	for _, tc := range []struct {
		version int
		ordered bool
		prefix  string
	}{{1, true, ""}, {1, false, ""}, {2, true, "v2/"}, {2, false, "v2/"}} {
		ordered := tc.ordered
		for seed := range seeds {
			t.Run(fmt.Sprintf("%sordered=%v/seed=%d", tc.prefix, ordered, seed), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(seed), 7))
				dir := t.TempDir()
				text := strings.Replace(mbkJob(ordered), "transform_version = 1", fmt.Sprintf("transform_version = %d", tc.version), 1)
				j := writeJob(t, dir, text)
				db := openTestDB(t, dir)
				ctx := context.Background()
				state := map[int64]*mbkStored{}
				var snapshots []map[int64]mbkStored
				for b := range 4 {
					rows := randomBatch(rng)
					lines := make([]string, len(rows))
					for i, r := range rows {
						lines[i] = r.json() + "\n"
					}
					file := filepath.Join(dir, fmt.Sprintf("b%d.jsonl", b))
					require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "")), 0o644))
					want := foldBatch(state, rows, ordered)
					res, err := db.Run(ctx, j, RunOptions{Input: file})
					require.NoError(t, err, "batch %d: %s", b, strings.Join(lines, ""))
					require.Equal(t, int64(len(rows)), res.RowsIn)

					// Outcomes: per row as received (multiset), and the counts balance.
					wantOut := []string{}
					for i, r := range rows {
						wantOut = append(wantOut, r.raw()+" "+want[i])
					}
					slices.Sort(wantOut)
					gotOut := queryStrings(t, db.SQL(), `SELECT coalesce(k, 'NULL') || '|' || coalesce(o, 'NULL') || '|' || coalesce(v, 'NULL') || '|' || coalesce(n, 'NULL') || ' ' || outcome
						FROM things_outcomes WHERE batch_id = ? ORDER BY 1`, filepath.Base(file))
					require.Equal(t, wantOut, nonNilStrings(gotOut), "batch %d outcomes\n%s", b, strings.Join(lines, ""))
					var sum int64
					for _, c := range res.Outcomes {
						sum += c
					}
					require.Equal(t, res.RowsIn, sum)

					require.Equal(t, foldRows(state), queryStrings(t, db.SQL(), `SELECT k || '|' || coalesce(CAST(o AS VARCHAR), 'NULL') || '|' || coalesce(v, 'NULL') || '|' || coalesce(CAST(n AS VARCHAR), 'NULL') || '|' || idem_status FROM things ORDER BY k`),
						"batch %d target", b)
					snap := map[int64]mbkStored{}
					for k, v := range state {
						snap[k] = *v
					}
					snapshots = append(snapshots, snap)
				}
				// Every snapshot reads back as the fold had it then.
				cols, err := catalog.TargetColumns(ctx, db.SQL(), "things")
				require.NoError(t, err)
				for i, snap := range snapshots {
					st := map[int64]*mbkStored{}
					for k, v := range snap {
						st[k] = &v
					}
					got := queryStrings(t, db.SQL(), `SELECT k || '|' || coalesce(CAST(o AS VARCHAR), 'NULL') || '|' || coalesce(v, 'NULL') || '|' || coalesce(CAST(n AS VARCHAR), 'NULL') || '|' || idem_status FROM (`+mustPinned(t, db.SQL(), "things", cols, int64(i+1))+`) ORDER BY k`)
					require.Equal(t, foldRows(st), got, "snapshot %d", i+1)
				}
			})
		}
	}
}

func foldRows(state map[int64]*mbkStored) []string {
	keys := make([]int64, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s := func(p *int64) string {
		if p == nil {
			return "NULL"
		}
		return strconv.FormatInt(*p, 10)
	}
	out := []string{}
	for _, k := range keys {
		st := state[k]
		v := "NULL"
		if st.v != nil {
			v = *st.v
		}
		out = append(out, fmt.Sprintf("%d|%s|%s|%s|%s", k, s(st.o), v, s(st.n), st.status))
	}
	return out
}

func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(q, args...)
	require.NoError(t, err)
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
