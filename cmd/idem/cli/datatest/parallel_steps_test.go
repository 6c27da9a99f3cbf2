package datatest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestBuiltinStepsSameBytesOnAnyThreads: the steps of a built-in pipeline
// run on DuckDB's threads (job.ParallelSteps), so every built-in must give
// the same database, byte for byte (targets, outcomes, history, ledger,
// snapshots, packets), with 1 thread and with 4. Each pipeline gets two
// batches of generated rows (125,000 then 30,000; 400,000 each with
// IDEM_LONG=1), the first more than a DuckDB row group, where
// exact repeats, in-batch conflicts, superseded, stale and invalid rows,
// deletes and, for merge_by_key, ties of its ordering value meet; the
// second batch revisits the first one's keys.
func TestBuiltinStepsSameBytesOnAnyThreads(t *testing.T) {
	t.Parallel()
	n := clitest.LongOr(125_000, 400_000)
	// The first batch is past a row group (the parallel plans); the
	// second, which revisits its keys, is 30,000 rows in CI (400,000 with
	// IDEM_LONG=1).
	count := func(b int) int {
		if b == 1 {
			return n
		}
		return clitest.LongOr(30_000, 400_000)
	}
	type batch func(w *bufio.Writer, rng *rand.Rand, b int)
	cases := []struct {
		name, job string
		format    string
		write     batch
	}{
		{"versioned_changes", `name = "vc"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
[target]
table = "vc"
`, "jsonl", func(w *bufio.Writer, rng *rand.Rand, b int) {
			for i := range count(b) {
				e := rng.IntN(n / 3)
				v := rng.IntN(6) + b
				op := []string{"upsert", "upsert", "upsert", "delete", "UPSERT"}[rng.IntN(5)]
				ver := fmt.Sprint(v)
				if rng.IntN(50) == 0 {
					ver = "1.5"
				}
				val := fmt.Sprintf(`"v%d"`, rng.IntN(3))
				if op == "delete" {
					val = "null"
				}
				id := fmt.Sprintf("c%d-%d", b, i)
				if rng.IntN(20) == 0 {
					id = fmt.Sprintf("c%d-%d", b, rng.IntN(i+1)) // a change id again
				}
				fmt.Fprintf(w, `{"change_id":%q,"entity_id":"e%d","source_version":%q,"operation":%q,"value":%s}`+"\n", id, e, ver, op, val)
			}
		}},
		{"orders", `name = "orders"
pipeline = "orders"
transform_version = 1
schema_version = 1
[target]
table = "orders"
`, "jsonl", func(w *bufio.Writer, rng *rand.Rand, b int) {
			for range count(b) {
				kind := []string{"upsert", "upsert", "upsert", "delete"}[rng.IntN(4)]
				fmt.Fprintf(w, `{"order_id":"o-%d","position":%d,"kind":%q,"amount_cents":%d,"event_day":%d,"schema_version":3,"currency":%q}`+"\n",
					rng.IntN(n/3), rng.IntN(2*n)+b*n/2, kind, rng.IntN(1000)-5, 40+rng.IntN(10), []string{"EUR", "USD", "INR", "XXX"}[rng.IntN(4)])
			}
		}},
		{"merge_by_key", `name = "trips"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
[input]
format = "jsonl"
[input.columns]
trip_id = "BIGINT"
rider_id = "BIGINT"
fare = "DOUBLE"
updated_at = "BIGINT"
[target]
table = "trips"
key = ["trip_id"]
order_by = "updated_at"
`, "jsonl", func(w *bufio.Writer, rng *rand.Rand, b int) {
			for range count(b) {
				fmt.Fprintf(w, `{"trip_id":%d,"rider_id":%d,"fare":%d.25,"updated_at":%d}`+"\n", rng.IntN(n/3), rng.IntN(100), rng.IntN(50), rng.IntN(4)+b)
			}
		}},
		{"sample", `name = "sample"
pipeline = "sample"
transform_version = 1
schema_version = 1
[input]
format = "csv"
[target]
table = "sample"
[params]
cap = 1000
licenses = ["CC0 1.0", "CC BY 4.0"]
`, "csv", func(w *bufio.Writer, rng *rand.Rand, b int) {
			fmt.Fprintln(w, "id,species_id,year,license")
			for i := range count(b) {
				fmt.Fprintf(w, "%d,%d,%d,%s\n", i*3+b, rng.IntN(40), 1950+rng.IntN(70), []string{"CC0 1.0", "CC BY 4.0", "CC BY-NC 4.0"}[rng.IntN(3)])
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var inputs []string
			rng := rand.New(rand.NewPCG(uint64(len(c.name)), 31))
			for b := range 2 {
				p := filepath.Join(dir, fmt.Sprintf("batch-%d.%s", b+1, c.format))
				f, err := os.Create(p)
				require.NoError(t, err)
				w := bufio.NewWriter(f)
				c.write(w, rng, b+1)
				require.NoError(t, w.Flush())
				require.NoError(t, f.Close())
				inputs = append(inputs, p)
			}
			jobFile := filepath.Join(dir, "job.toml")
			clitest.WriteFile(t, jobFile, c.job)
			var dumps []string
			for _, threads := range []string{"1", "4"} {
				db := filepath.Join(dir, "threads-"+threads+".duckdb")
				for _, in := range inputs {
					r := clitest.CallIdem(t, "run", jobFile, "--input", in, "--db", db, "--threads", threads)
					require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
				}
				dumps = append(dumps, clitest.DumpState(t, db))
			}
			require.True(t, dumps[0] == dumps[1], "%s: 4 threads give another database than 1: %s", c.name, clitest.FirstDiff(dumps[0], dumps[1]))
		})
	}
}

// TestModelsSameBytesOnAnyThreads: a model DuckDB's bound plan proves
// order-free (run.ModelOrderFree) runs on the job's threads; every model,
// order-free or kept on one thread, gives the same rows with 1 and 4
// threads over the same source rows fed in another order each time (a
// DECIMAL and an integer sum, averages, ranks, joins, unions and
// DISTINCT on the job's threads; a sum of DOUBLE, string_agg,
// row_number and LIMIT on one). 2 threads too with IDEM_LONG=1.
func TestModelsSameBytesOnAnyThreads(t *testing.T) {
	t.Parallel()
	n := clitest.LongOr(130_000, 600_000) // more than a DuckDB row group (122,880)
	models := map[string]string{
		"m_agg":      "SELECT grp, count(*) AS n, sum(amt) AS s, min(f) AS lo, max(f) AS hi, avg(id) AS a FROM {{upstream:src}} GROUP BY grp",
		"m_join":     "SELECT a.grp, count(*) AS n, sum(b.amt) AS s FROM {{upstream:src}} AS a JOIN {{upstream:src}} AS b ON a.id = b.id + 1 GROUP BY a.grp",
		"m_rank":     "SELECT id, rank() OVER (PARTITION BY grp ORDER BY amt) AS r FROM {{upstream:src}}",
		"m_union":    "SELECT grp AS g FROM {{upstream:src}} UNION SELECT grp + 1000 FROM {{upstream:src}}",
		"m_distinct": "SELECT DISTINCT grp, name FROM {{upstream:src}}",
		"m_fsum":     "SELECT grp, sum(f) AS s, avg(f) AS a FROM {{upstream:src}} GROUP BY grp",
		"m_rownum":   "SELECT id, row_number() OVER (PARTITION BY grp ORDER BY amt) AS rn FROM {{upstream:src}}",
		"m_list":     "SELECT grp, string_agg(name, ',') AS names FROM {{upstream:src}} GROUP BY grp",
		"m_limit":    "SELECT id, amt FROM {{upstream:src}} ORDER BY amt LIMIT 10",
	}
	keys := map[string]string{"m_agg": `"grp"`, "m_join": `"grp"`, "m_rank": `"id"`, "m_union": `"g"`, "m_distinct": `"grp", "name"`,
		"m_fsum": `"grp"`, "m_rownum": `"id"`, "m_list": `"grp"`, "m_limit": `"id"`}
	rng := rand.New(rand.NewPCG(44, 2))
	lines := make([]string, n)
	for i := range n {
		lines[i] = fmt.Sprintf("%d,%d,%d.%02d,%d.%d,n%d", i, rng.IntN(40), rng.IntN(10000), rng.IntN(100), rng.IntN(1000), rng.IntN(1000), rng.IntN(7))
	}
	var got []map[string][]string
	settings := []string{"1", "4"}
	if clitest.LongTests() {
		settings = []string{"1", "2", "4"}
	}
	for k, threads := range settings {
		dir := t.TempDir()
		rng.Shuffle(len(lines), func(a, b int) { lines[a], lines[b] = lines[b], lines[a] })
		f, err := os.Create(filepath.Join(dir, "src.csv"))
		require.NoError(t, err)
		w := bufio.NewWriter(f)
		fmt.Fprintln(w, "id,grp,amt,f,name")
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
		require.NoError(t, w.Flush())
		require.NoError(t, f.Close())
		duck := "[duckdb]\nthreads = " + threads + "\n"
		clitest.WriteFile(t, filepath.Join(dir, "src.toml"), `name = "src"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "p.duckdb"
[input]
path = "src.csv"
format = "csv"
[input.columns]
id = "BIGINT"
grp = "INTEGER"
amt = "DECIMAL(12,2)"
f = "DOUBLE"
name = "VARCHAR"
[target]
key = ["id"]
`+duck)
		for name, sql := range models {
			clitest.WriteFile(t, filepath.Join(dir, name+".toml"), `name = "`+name+`"
pipeline = "select"
database = "p.duckdb"
[input]
upstream = ["src"]
[transform]
sql = "models/`+name+`.sql"
[target]
key = [`+keys[name]+`]
`+duck)
			clitest.WriteFile(t, filepath.Join(dir, "models", name+".sql"), sql+"\n")
		}
		r := clitest.CallIdem(t, "run", dir)
		require.Equal(t, 0, r.Code, "threads %s: %s", threads, r.Stdout+r.Stderr)
		rows := map[string][]string{}
		for name := range models {
			rows[name] = clitest.QueryStrs(t, filepath.Join(dir, "p.duckdb"), "SELECT CAST(t AS VARCHAR) FROM "+name+" AS t ORDER BY ALL")
			require.NotEmpty(t, rows[name], name)
		}
		got = append(got, rows)
		if k > 0 {
			for name := range models {
				require.Equal(t, got[0][name], rows[name], "%s: %s threads give other rows than 1", name, threads)
			}
		}
	}
}
