package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

func filesJob(dir, batch string) string {
	return fmt.Sprintf(`
name = "trips"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q
format = "jsonl"
mode = "files"
batch = %q

[input.columns]
trip_id = "BIGINT"
fare = "DOUBLE"
updated_at = "BIGINT"

[target]
key = ["trip_id"]
order_by = "updated_at"

[[quality.rules]]
name = "fare_positive"
sql = "fare >= 0"
`+clitest.DuckdbSection, filepath.Join(dir, "test.duckdb"), filepath.Join(dir, "landing", "*.jsonl"), batch)
}

// landing writes file name with n rows whose trip ids start at first.
func landing(t *testing.T, dir, name string, first, n int) {
	var b strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, `{"trip_id": %d, "fare": %d.5, "updated_at": 1}`+"\n", i, i%7)
	}
	clitest.WriteFile(t, filepath.Join(dir, "landing", name), b.String())
}

// TestFilesEachFileOnceAcrossKill: files added between runs are each taken
// exactly once, in name order, also when the process is killed between two
// files or in the middle of one.
func TestFilesEachFileOnceAcrossKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	job := filepath.Join(dir, "trips.toml")
	clitest.WriteFile(t, job, filesJob(dir, "per_file"))
	db := filepath.Join(dir, "test.duckdb")
	landing(t, dir, "a.jsonl", 0, 5)
	landing(t, dir, "b.jsonl", 5, 5)

	// Killed before the second file: a is committed with its record, b not.
	r := clitest.RunCLI(t, dir, "before_file:b.jsonl", "run", job)
	require.True(t, r.Killed, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, []string{"a.jsonl"}, clitest.QueryStrs(t, db, `SELECT batch_id FROM idem.files ORDER BY path`))

	// Killed in the middle of b (after its steps, before COMMIT): nothing of b.
	landing(t, dir, "c.jsonl", 10, 5)
	r = clitest.RunCLI(t, dir, "before_commit", "run", job)
	require.True(t, r.Killed)
	require.Equal(t, []string{"a.jsonl"}, clitest.QueryStrs(t, db, `SELECT batch_id FROM idem.files ORDER BY path`))

	// A clean run takes b then c; the next takes nothing.
	r = clitest.RunCLI(t, dir, "", "run", job, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var res struct {
		Decision string   `json:"decision"`
		NewFiles []string `json:"new_files"`
		Runs     []struct {
			BatchID  string `json:"batch_id"`
			Snapshot int64  `json:"snapshot"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
	require.Equal(t, "applied", res.Decision)
	require.Len(t, res.Runs, 2)
	require.Equal(t, "b.jsonl", res.Runs[0].BatchID)
	require.Equal(t, int64(2), res.Runs[0].Snapshot)
	require.Equal(t, "c.jsonl", res.Runs[1].BatchID)
	require.Equal(t, int64(3), res.Runs[1].Snapshot)

	r = clitest.RunCLI(t, dir, "", "run", job, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"decision":"skipped"`)

	// Every row read exactly once: one outcome per input row, one batch per file.
	require.Equal(t, []int64{15, 15}, clitest.QueryInts(t, db, `SELECT count(*) FROM trips_outcomes UNION ALL SELECT count(DISTINCT trip_id) FROM trips_outcomes`)[:2])
	require.Equal(t, []string{"a.jsonl", "b.jsonl", "c.jsonl"}, clitest.QueryStrs(t, db, `SELECT batch_id FROM idem.ledger ORDER BY snapshot`))
	require.Equal(t, []int64{15}, clitest.QueryInts(t, db, `SELECT count(*) FROM trips`))

	// A committed file whose content changed is refused and named.
	landing(t, dir, "b.jsonl", 5, 6)
	r = clitest.RunCLI(t, dir, "", "run", job)
	require.Equal(t, 3, r.Code)
	require.Contains(t, r.Stderr, "b.jsonl changed after it was committed in batch b.jsonl")
}

// TestFilesAllInOneBatch: batch = "all" applies every new file of a run as
// one batch and records each file.
func TestFilesAllInOneBatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	job := filepath.Join(dir, "trips.toml")
	clitest.WriteFile(t, job, filesJob(dir, "all"))
	db := filepath.Join(dir, "test.duckdb")
	landing(t, dir, "a.jsonl", 0, 3)
	landing(t, dir, "b.jsonl", 2, 3) // trip 2 again, identical: one batch, so both rows are accepted

	code, out, errOut := clitest.InProcess(t, "plan", job, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"decision":"applied"`)
	require.Contains(t, out, `"new_files":["`+filepath.Join(dir, "landing", "a.jsonl")+`","`+filepath.Join(dir, "landing", "b.jsonl")+`"]`)

	code, out, errOut = clitest.InProcess(t, "run", job, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"batch_id":"a.jsonl..b.jsonl"`)

	code, out, errOut = clitest.InProcess(t, "plan", job, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"decision":"skipped"`)
	require.Equal(t, []string{"a.jsonl..b.jsonl", "a.jsonl..b.jsonl"}, clitest.QueryStrs(t, db, `SELECT batch_id FROM idem.files ORDER BY path`))
	require.Equal(t, []int64{6}, clitest.QueryInts(t, db, `SELECT count(*) FROM trips_outcomes WHERE outcome = 'accepted'`))

	landing(t, dir, "c.jsonl", 10, 2)
	code, out, errOut = clitest.InProcess(t, "run", job, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"batch_id":"c.jsonl"`)
	require.Equal(t, []int64{8}, clitest.QueryInts(t, db, `SELECT count(*) FROM trips_outcomes`))
}

// TestTripsExample: the example job configs/trips.toml runs from the
// repository root, takes each fixture file once, and lints clean.
func TestTripsExample(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "trips.duckdb")
	root := filepath.Join("..", "..", "..")
	r := clitest.RunCLI(t, root, "", "run", "configs/trips.toml", "--db", db, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"new_files":["fixtures/trips/2026-01-01.jsonl","fixtures/trips/2026-01-02.jsonl","fixtures/trips/2026-01-03.jsonl"]`)
	require.Equal(t, []string{
		"1 13.0 2 active", "2  1 conflict", "4 21.0 2 active", "6 9.5 4 active",
	}, clitest.QueryStrs(t, db, `SELECT trip_id || ' ' || coalesce(CAST(fare AS VARCHAR), '') || ' ' || updated_at || ' ' || idem_status FROM trips ORDER BY trip_id`))
	require.Equal(t, []string{
		"accepted 5", "conflict 3", "duplicate 1", "invalid_key 1", "invalid_rule:fare_positive 1", "invalid_type:fare 1", "stale 1", "superseded_in_batch 1",
	}, clitest.QueryStrs(t, db, `SELECT outcome || ' ' || count(*) FROM trips_outcomes GROUP BY outcome ORDER BY outcome`))
	r = clitest.RunCLI(t, root, "", "run", "configs/trips.toml", "--db", db, "--json")
	require.Contains(t, r.Stdout, `"decision":"skipped"`)
}
