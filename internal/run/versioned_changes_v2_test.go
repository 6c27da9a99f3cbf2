package run_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"
)

var (
	vc2Scenarios = flag.Int("vc2.scenarios", 0, "random scenarios of TestVersionedChangesV2SameAsV1 (0: 3, or 300 with IDEM_LONG=1)")
	vc2Seed      = flag.Uint64("vc2.seed", 0, "seed of the first scenario of TestVersionedChangesV2SameAsV1 (0: from the clock); scenario i uses seed+i")
)

// TestVersionedChangesV2SameAsV1 is the differential test of
// versioned_changes transform v2 against v1: random scenarios (the
// property test's generator: repeats, equal-version conflicts, out-of-order
// and stale versions, deletes of unknown entities, every kind of invalid
// field, NULLs and missing fields, old batches replayed under new ids,
// retries), fed to a v1 job and a v2 job on two databases as JSON Lines,
// CSV or Parquet (typed columns: source_version BIGINT). After every batch
// the two runs must agree on the run result (decision, rows in and out,
// outcome counts, rows written, conflicts), on the batch's stored outcome
// rows in stored order, and on the target; at the end the CSV export of
// every snapshot must have the same bytes. A failure prints the seed and
// the batches.
//
//	go test ./internal/run -run TestVersionedChangesV2SameAsV1 -vc2.scenarios=1000
func TestVersionedChangesV2SameAsV1(t *testing.T) {
	t.Parallel()
	scenarios := *vc2Scenarios
	if scenarios == 0 {
		scenarios = 3
		if os.Getenv("IDEM_LONG") == "1" {
			scenarios = 300
		}
	}
	seen := vcRunScenarios(t, *vc2Seed, scenarios, vc2RunScenario)
	if scenarios >= 100 {
		vcRequireEveryOutcome(t, seen)
	}
}

// vcRunScenarios runs scenarios seed, seed+1, ... (seed 0: from the clock)
// with run, each a subtest named by its seed, and sums the outcomes they
// saw. A run spends much of its time waiting for fsync, so more scenarios
// than cores (-vc.workers) run side by side; t.Run may be called from
// several goroutines.
func vcRunScenarios(t *testing.T, seed uint64, scenarios int, run func(*testing.T, uint64) map[string]int64) map[string]int64 {
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d, %d scenarios", seed, scenarios)
	next := make(chan uint64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int64{}
	for range *vcWorkers {
		wg.Go(func() {
			for s := range next {
				t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
					counts := run(t, s)
					mu.Lock()
					defer mu.Unlock()
					for k, v := range counts {
						seen[k] += v
					}
				})
			}
		})
	}
	for i := range scenarios {
		next <- seed + uint64(i)
	}
	close(next)
	wg.Wait()
	t.Logf("outcomes over all scenarios: %s", vcFormatCounts(seen))
	return seen
}

// vcRequireEveryOutcome fails unless the scenarios reached every outcome
// (erased is another test's business): else a property says little.
func vcRequireEveryOutcome(t *testing.T, seen map[string]int64) {
	if t.Failed() {
		return
	}
	for _, o := range []string{ocInvalidChangeID, ocInvalidEntityID, ocInvalidVersion, ocInvalidOp, ocInvalidPayload,
		ocSuperseded, ocAccepted, ocStale, ocDuplicate, ocConflict} {
		require.Positive(t, seen[o], "no scenario produced %s", o)
	}
}

// vc2RunScenario runs one scenario on a v1 and a v2 job and returns the
// outcomes it saw.
func vc2RunScenario(t *testing.T, seed uint64) map[string]int64 {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	envs := [2]*vcEnv{newVCEnvVersion(t, 1), newVCEnvVersion(t, 2)}
	g := newVCGen(rng)
	// Larger batches than the property test's: the differential test
	// needs no model, and a batch costs about the same at 40 rows as at 4.
	g.maxV += int64(rng.IntN(4))
	type step struct {
		batchID string
		paths   [2]string
		rows    []vcRow
	}
	var done []step
	var log strings.Builder
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, batch %d: %s\nreplay: go test ./internal/run -run 'TestVersionedChangesV2SameAsV1/seed=%d$' -vc2.seed=%d -vc2.scenarios=1 -v\nbatches so far:\n%s",
			seed, i, fmt.Sprintf(format, args...), seed, seed, log.String())
	}
	seen := map[string]int64{}
	var snapshots []int64
	batches := 2 + rng.IntN(5)
	for i := range batches {
		var st step
		switch k := rng.IntN(10); {
		case k == 0 && len(done) > 0:
			st = done[len(done)-1] // a retry: already_committed
		case k <= 2 && len(done) > 0:
			old := done[rng.IntN(len(done))]
			st = step{batchID: fmt.Sprintf("b%02d-replay-of-%s", i, old.batchID), paths: old.paths, rows: old.rows}
		default:
			for range 1 + rng.IntN(4) {
				st.rows = append(st.rows, g.batch(i)...)
			}
			st.batchID = fmt.Sprintf("b%02d", i)
			format := []string{"jsonl", "csv", "parquet"}[rng.IntN(3)]
			for k, e := range envs {
				st.paths[k] = vc2File(t, e, format, st.rows)
			}
		}
		fmt.Fprintf(&log, "-- %s (%s)\n%s", st.batchID, filepath.Ext(st.paths[0]), vcJSONL(st.rows))
		var res [2]*run.Result
		for k, e := range envs {
			r, err := e.apply(st.paths[k], st.batchID)
			if err != nil {
				fail(i, "v%d: apply: %v", k+1, err)
			}
			res[k] = r
		}
		if a, b := vc2ResultText(res[0]), vc2ResultText(res[1]); a != b {
			fail(i, "run results differ:\nv1 %s\nv2 %s", a, b)
		}
		if res[0].Decision == report.DecisionApplied {
			done = append(done, st)
			snapshots = append(snapshots, res[0].Snapshot)
			for o, n := range res[0].Outcomes {
				seen[o] += n
			}
		}
		if a, b := envs[0].storedOutcomes(st.batchID), envs[1].storedOutcomes(st.batchID); !slices.Equal(a, b) {
			fail(i, "stored outcomes differ (- v1, + v2):\n%s", vcDiffLines(a, b))
		}
		if a, b := vcStringsOf(envs[0].state()), vcStringsOf(envs[1].state()); !slices.Equal(a, b) {
			fail(i, "targets differ (- v1, + v2):\n%s", vcDiffLines(a, b))
		}
	}
	// The bytes idem proves: the export of every snapshot.
	for _, snap := range snapshots {
		var sums [2]string
		for k, e := range envs {
			out := filepath.Join(e.dir, fmt.Sprintf("export-%d.csv", snap))
			r, err := export.Export(context.Background(), e.db, e.j, export.Options{Out: out, Snapshot: snap})
			require.NoError(t, err)
			sums[k] = r.SHA256
		}
		if sums[0] != sums[1] {
			fail(batches, "export of snapshot %d: v1 sha256 %s, v2 %s", snap, sums[0], sums[1])
		}
	}
	return seen
}

// newVCEnvVersion is newVCEnv with transform version v.
func newVCEnvVersion(t testing.TB, v int) *vcEnv {
	t.Helper()
	dir := t.TempDir()
	jobPath := filepath.Join(dir, "job.toml")
	text := fmt.Sprintf(`name = "vc"
pipeline = "versioned_changes"
transform_version = %d
schema_version = 1
database = %q

[target]
table = %q

[duckdb]
threads = 1
`, v, filepath.Join(dir, "idem.duckdb"), vcTable)
	require.NoError(t, os.WriteFile(jobPath, []byte(text), 0o644))
	return newVCEnvAt(t, jobPath)
}

// vc2File writes rows as the env's next input in format: JSON Lines as
// vcJSONL, CSV of the rows' texts (NULL an unquoted empty field), or
// Parquet with source_version typed BIGINT (a text that is no integer
// NULL), written by DuckDB from the JSON Lines.
func vc2File(t *testing.T, e *vcEnv, format string, rows []vcRow) string {
	t.Helper()
	switch format {
	case "csv":
		var b strings.Builder
		b.WriteString(strings.Join(vcColumns[:], ",") + "\n")
		for _, r := range rows {
			txt := r.text()
			for i, p := range txt {
				if i > 0 {
					b.WriteByte(',')
				}
				if p != nil {
					b.WriteString(`"` + strings.ReplaceAll(*p, `"`, `""`) + `"`)
				}
			}
			b.WriteByte('\n')
		}
		return e.file("csv", []byte(b.String()))
	case "parquet":
		src := e.file("jsonl", vcJSONL(rows))
		out := strings.TrimSuffix(src, ".jsonl") + ".parquet"
		cols := make([]string, len(vcColumns))
		for i, c := range vcColumns {
			cols[i] = fmt.Sprintf("'%s': 'VARCHAR'", c)
		}
		q := fmt.Sprintf(`COPY (SELECT change_id, entity_id, TRY_CAST(source_version AS BIGINT) AS source_version, operation, value
			FROM read_json('%s', format = 'newline_delimited', columns = {%s})) TO '%s' (FORMAT parquet)`, src, strings.Join(cols, ", "), out)
		if len(rows) == 0 {
			q = fmt.Sprintf(`COPY (SELECT NULL::VARCHAR AS change_id, NULL::VARCHAR AS entity_id, NULL::BIGINT AS source_version,
				NULL::VARCHAR AS operation, NULL::VARCHAR AS value WHERE false) TO '%s' (FORMAT parquet)`, out)
		}
		db, err := sql.Open("duckdb", "")
		require.NoError(t, err)
		defer db.Close()
		_, err = db.Exec(q)
		require.NoError(t, err)
		require.NoError(t, os.Remove(src))
		return out
	default:
		return e.file("jsonl", vcJSONL(rows))
	}
}

// vc2ResultText is what a run reports that v1 and v2 must agree on.
func vc2ResultText(r *run.Result) string {
	conflicts := "null"
	if r.Conflicts != nil {
		conflicts = fmt.Sprint(*r.Conflicts)
	}
	return fmt.Sprintf("%s snapshot %d rows_in %d rows_out %d written %d conflicts %s outcomes %s",
		r.Decision, r.Snapshot, r.RowsIn, r.RowsOut, r.RowsWritten, conflicts, vcFormatCounts(r.Outcomes))
}

// storedOutcomes reads one batch's stored outcome rows in stored order.
func (e *vcEnv) storedOutcomes(batchID string) []string {
	e.t.Helper()
	rows, err := e.db.SQL().QueryContext(context.Background(),
		`SELECT change_id, entity_id, source_version, operation, value, outcome FROM `+vcTable+`_outcomes WHERE batch_id = ? ORDER BY rowid`, batchID)
	require.NoError(e.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var f [5]sql.NullString
		var o vcOutcome
		require.NoError(e.t, rows.Scan(&f[0], &f[1], &f[2], &f[3], &f[4], &o.Outcome))
		for i := range f {
			if f[i].Valid {
				o.Row[i] = &f[i].String
			}
		}
		out = append(out, o.String())
	}
	require.NoError(e.t, rows.Err())
	return out
}
