package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/pipelines"
)

// The fuzzers run their seed corpus (f.Add and testdata/fuzz/<name>/) in
// every test run; `go test -fuzz=FuzzX ./runner` explores further.

// FuzzParseJob: any bytes give a valid job or a *JobFileError that names the
// file (exit 2), never a panic.
func FuzzParseJob(f *testing.F) {
	for _, p := range []string{"../../configs/sample.toml", "../../configs/versioned_changes.toml"} {
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte("name = \"j\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\n[params]\ncap = \"x\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJob("job.toml", data, pipelines.FS)
		if err != nil {
			var jfe *report.JobFileError
			require.True(t, errors.As(err, &jfe), "not a JobFileError: %T %v", err, err)
			require.Equal(t, "job.toml", jfe.File)
			require.True(t, strings.HasPrefix(err.Error(), "job.toml"), "error does not name the file: %v", err)
			require.Equal(t, report.ExitUsage, report.ExitCode(err))
			return
		}
		require.Regexp(t, sqltext.Identifier, j.Name)
		require.Regexp(t, sqltext.Identifier, j.Table)
		require.NotNil(t, j.Pipeline)
		require.NotEmpty(t, j.Steps)
		require.NotEmpty(t, j.DDL)
		require.Len(t, j.Params, len(j.Pipeline.Params), "every declared param resolved")
		require.LessOrEqual(t, j.DuckDB.Threads, report.MaxThreads)
	})
}

// stageFuzzer runs one pipeline on fuzzed input files against one database:
// a run either commits, with one outcome per input row, or fails with an
// error that names the input file and commits nothing.
type stageFuzzer struct {
	db   *DB
	j    *job.Job
	dir  string
	ext  string
	runs int
}

func newStageFuzzer(f *testing.F, config, ext string) *stageFuzzer {
	dir := f.TempDir()
	db, err := Open(context.Background(), filepath.Join(dir, "fuzz.duckdb"), OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1, MemoryLimit: "1GB"}})
	require.NoError(f, err)
	f.Cleanup(func() { db.Close() })
	j, err := LoadJob(config, pipelines.FS)
	require.NoError(f, err)
	return &stageFuzzer{db: db, j: j, dir: dir, ext: ext}
}

func (s *stageFuzzer) run(t *testing.T, data []byte) {
	ctx := context.Background()
	s.runs++
	in := filepath.Join(s.dir, fmt.Sprintf("in-%d%s", s.runs, s.ext))
	require.NoError(t, os.WriteFile(in, data, 0o644))
	defer os.Remove(in)
	before, err := catalog.ReadState(ctx, s.db.sql, s.j.Name)
	require.NoError(t, err)
	res, err := s.db.Run(ctx, s.j, RunOptions{Input: in, BatchID: fmt.Sprintf("b%d", s.runs)})
	after, serr := catalog.ReadState(ctx, s.db.sql, s.j.Name)
	require.NoError(t, serr, "the database is still usable")
	if err != nil {
		require.NotErrorIs(t, err, report.ErrFatal)
		require.Equal(t, report.ExitFailure, report.ExitCode(err), "%v", err)
		require.Contains(t, err.Error(), in, "the error names the input file")
		require.NotContains(t, err.Error(), ".inputs/", "the error names the user's file, not its retained copy")
		require.Equal(t, before, after, "a failed run committed something")
		return
	}
	var n int64
	for _, c := range res.Outcomes {
		n += c
	}
	require.Equal(t, res.RowsIn, n, "one outcome per input row")
	if res.Decision == report.DecisionSkipped {
		require.Equal(t, before.Snapshot, after.Snapshot)
		return
	}
	require.Equal(t, before.Snapshot+1, after.Snapshot)
	require.Equal(t, res.Snapshot, after.Snapshot)
}

// FuzzStageJSONL feeds versioned_changes arbitrary JSONL batches.
func FuzzStageJSONL(f *testing.F) {
	for _, p := range []string{"batch-1.jsonl", "batch-2.jsonl", "batch-3.jsonl"} {
		data, err := os.ReadFile(filepath.Join("../../fixtures/changes", p))
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte(""))
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"change_id":"a","entity_id":"e","source_version":"seven","operation":"upsert","value":"v"}` + "\n"))
	f.Add([]byte(`{"change_id":"a","entity_id":"e","source_version":1,"operation":"upsert","value":{"nested":[1,2]}}` + "\n"))
	f.Add([]byte(`[1,2,3]` + "\n"))
	f.Add([]byte(`{"change_id":"a"` + "\n"))
	s := newStageFuzzer(f, "../../configs/versioned_changes.toml", ".jsonl")
	f.Fuzz(func(t *testing.T, data []byte) { s.run(t, data) })
}

// FuzzStageCSV feeds the sample pipeline arbitrary CSV files.
func FuzzStageCSV(f *testing.F) {
	f.Add([]byte("id,species_id,year,license\n1,2,2000,CC0 1.0\n2,2,,CC BY 4.0\n"))
	f.Add([]byte("id,species_id,year,license\n"))
	f.Add([]byte(""))
	f.Add([]byte("license,year,species_id,id\r\nCC0 1.0,1999,7,8\r\n"))
	f.Add([]byte("id,species_id,year,license\n1,2,2000,\"CC0 1.0\n"))
	f.Add([]byte("id,species_id,year,license\nx,y,z,w\n1,2\n"))
	f.Add([]byte("\ufeffid,species_id,year,license\n99999999999999999999,2,2000,CC0 1.0\n"))
	s := newStageFuzzer(f, "../../configs/sample.toml", ".csv")
	f.Fuzz(func(t *testing.T, data []byte) { s.run(t, data) })
}
