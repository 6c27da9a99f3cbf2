package clitest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"
)

// GuardJob is a versioned_changes job in its own temp folder with its own
// database.
type GuardJob struct {
	t    *testing.T
	Dir  string
	DB   string
	File string // the job file
}

// Copy is the job in a new folder of the test's own holding a copy of j's
// folder: its job file, inputs and database (a copy keeps the database's
// id: it is the same database, not another one).
func (j *GuardJob) Copy(t *testing.T) *GuardJob {
	t.Helper()
	c := GuardJobAt(t, filepath.Join(t.TempDir(), "job"))
	CopyDir(t, j.Dir, c.Dir)
	return c
}

// Input writes a jsonl input file in the job's folder and returns its path.
func (j *GuardJob) Input(name string, lines ...string) string {
	j.t.Helper()
	p := filepath.Join(j.Dir, name)
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	require.NoError(j.t, os.WriteFile(p, []byte(b.String()), 0o644))
	return p
}

// Run runs the job with args after "run JOB".
func (j *GuardJob) Run(args ...string) CLIResult {
	j.t.Helper()
	return CallIdem(j.t, append([]string{"run", j.File}, args...)...)
}

// Apply runs the job with --json, requires exit 0 and returns the result.
func (j *GuardJob) Apply(args ...string) run.Result {
	j.t.Helper()
	r := j.Run(append(args, "--json")...)
	require.Equal(j.t, 0, r.Code, "run %v: stderr: %s", args, r.Stderr)
	var res run.Result
	require.NoError(j.t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	return res
}

// Refused runs the job, requires exit 3 and that nothing changed, and
// returns stderr.
func (j *GuardJob) Refused(args ...string) string {
	j.t.Helper()
	before := CaptureState(j.t, j.DB)
	r := j.Run(args...)
	require.Equal(j.t, report.ExitRefused, r.Code, "run %v: stdout %s stderr %s", args, r.Stdout, r.Stderr)
	require.Equal(j.t, before, CaptureState(j.t, j.DB), "a refused run changed the database")
	return r.Stderr
}

// Query runs read-only SQL against the job's database.
func (j *GuardJob) Query(sql string) [][]any {
	j.t.Helper()
	rows, err := inspect.Query(context.Background(), j.DB, sql, run.OpenOptions{})
	require.NoError(j.t, err)
	return rows.Values
}

// State is the job's state row: snapshot, cursor, epoch.
func (j *GuardJob) State() (snapshot, cursor, epoch int64) {
	j.t.Helper()
	rows := j.Query(`SELECT snapshot, cursor, epoch FROM idem.jobs WHERE job = '` + ApplyJobName + `'`)
	require.Len(j.t, rows, 1)
	return rows[0][0].(int64), rows[0][1].(int64), rows[0][2].(int64)
}

// logEntries runs `idem log JOB --json`.
func (j *GuardJob) Log() []catalog.LogEntry {
	j.t.Helper()
	r := CallIdem(j.t, "log", j.File, "--json")
	require.Equal(j.t, 0, r.Code, r.Stderr)
	var out struct {
		Job  string             `json:"job"`
		Runs []catalog.LogEntry `json:"runs"`
	}
	require.NoError(j.t, json.Unmarshal([]byte(r.Stdout), &out), r.Stdout)
	require.Equal(j.t, ApplyJobName, out.Job)
	return out.Runs
}

// ApplyJobName and ApplyTable are the name and target of GuardJob's job.
const ApplyJobName, ApplyTable = "customer_state", "customer_state"

// NewGuardJob writes the versioned_changes job of the guard tests into a
// new folder, with nothing run yet.
func NewGuardJob(t *testing.T) *GuardJob {
	t.Helper()
	j := GuardJobAt(t, t.TempDir())
	// The database is named relative to the job file's folder, so a copy
	// of the folder (copy) is the same job on a copy of the database.
	toml := fmt.Sprintf(`name = %q
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = "idem.duckdb"

[input]
path = %q
format = "jsonl"

[target]
table = %q
`+DuckdbSection, ApplyJobName, ChangesFixture(t, "batch-1.jsonl"), ApplyTable)
	require.NoError(t, os.WriteFile(j.File, []byte(toml), 0o644))
	return j
}

// GuardJobAt is the GuardJob whose folder is dir.
func GuardJobAt(t *testing.T, dir string) *GuardJob {
	return &GuardJob{t: t, Dir: dir, DB: filepath.Join(dir, "idem.duckdb"), File: filepath.Join(dir, "job.toml")}
}

var appliedFixture Once[*GuardJob]

// AppliedGuardJob is NewGuardJob after one clean run of batch-1 (j.apply()),
// a copy of a fixture made once per package run. Tests that need two
// databases of their own (distinct ids) make them with NewGuardJob.
func AppliedGuardJob(t *testing.T) *GuardJob {
	t.Helper()
	return appliedFixture.Get(t, func(t *testing.T) *GuardJob {
		j := NewGuardJob(t)
		j.Apply()
		f := GuardJobAt(t, FixtureDir(t, "applied"))
		CopyDir(t, j.Dir, f.Dir)
		return f
	}).Copy(t)
}

// ChangesFixture is the absolute path of fixtures/changes/<name>.
func ChangesFixture(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), "fixtures", "changes", name)
	require.FileExists(t, p)
	return p
}

// CallIdem is cli with its results in one value.
func CallIdem(t *testing.T, args ...string) CLIResult {
	t.Helper()
	code, stdout, stderr := InProcess(t, args...)
	return CLIResult{Code: code, Stdout: stdout, Stderr: stderr}
}

// DBState is every table of a database rendered as text, keyed by table:
// the targets, their outcomes and history, idem.ledger, idem.jobs (key,
// parts, snapshot, cursor, epoch), idem.snapshots, idem.released,
// idem.inputs, idem.erasures. The run log (idem.runs) is left out: a
// refused or failed run is recorded there by design; so is idem.commits,
// which holds the database's random id.
type DBState map[string]string

// CaptureState reads DBState from the database at path, read-only and
// without changing anything beside it (inspect). A database that does not
// exist yet is a state of its own.
func CaptureState(t *testing.T, path string) DBState {
	t.Helper()
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return DBState{"": "no database"}
	}
	return maps.Clone(cachedState("capture", path, stateSize, func() DBState { return captureState(t, path) }))
}

func captureState(t *testing.T, path string) DBState {
	t.Helper()
	state := DBState{}
	Inspect(t, path, func(conn *sql.Conn) {
		ctx := context.Background()
		tables, err := QueryStrings(ctx, conn, `SELECT schema_name || '.' || table_name FROM duckdb_tables()
			WHERE database_name = current_database() AND NOT (schema_name = 'idem' AND table_name IN ('runs', 'commits'))
			ORDER BY schema_name, table_name`)
		require.NoError(t, err)
		for _, st := range tables {
			schema, table, _ := strings.Cut(st, ".")
			name := fmt.Sprintf("%q.%q", schema, table)
			rows, err := conn.QueryContext(ctx, "SELECT * FROM "+qi(schema)+"."+qi(table)+" ORDER BY ALL")
			require.NoError(t, err)
			cols, err := rows.Columns()
			require.NoError(t, err)
			var b strings.Builder
			b.WriteString(strings.Join(cols, ",") + "\n")
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			for rows.Next() {
				require.NoError(t, rows.Scan(ptrs...))
				b.WriteString(fmt.Sprintln(vals...))
			}
			require.NoError(t, rows.Err())
			require.NoError(t, rows.Close())
			state[name] = b.String()
		}
	})
	require.Contains(t, state, `"idem"."ledger"`, "captureState must see idem's tables")
	return state
}

// WriteText writes text to path, requiring success.
func WriteText(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}
