package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"
)

// guardJob is a versioned_changes job in its own temp folder with its own
// database.
type guardJob struct {
	t    *testing.T
	dir  string
	db   string
	file string // the job file
}

const applyJobName, applyTable = "customer_state", "customer_state"

func newGuardJob(t *testing.T) *guardJob {
	t.Helper()
	j := guardJobAt(t, t.TempDir())
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
`+duckdbSection, applyJobName, changesFixture(t, "batch-1.jsonl"), applyTable)
	require.NoError(t, os.WriteFile(j.file, []byte(toml), 0o644))
	return j
}

// guardJobAt is the guardJob whose folder is dir.
func guardJobAt(t *testing.T, dir string) *guardJob {
	return &guardJob{t: t, dir: dir, db: filepath.Join(dir, "idem.duckdb"), file: filepath.Join(dir, "job.toml")}
}

// copy is the job in a new folder of the test's own holding a copy of j's
// folder: its job file, inputs and database (a copy keeps the database's
// id: it is the same database, not another one).
func (j *guardJob) copy(t *testing.T) *guardJob {
	t.Helper()
	c := guardJobAt(t, filepath.Join(t.TempDir(), "job"))
	copyDir(t, j.dir, c.dir)
	return c
}

var appliedFixture once[*guardJob]

// appliedGuardJob is newGuardJob after one clean run of batch-1 (j.apply()),
// a copy of a fixture made once per package run. Tests that need two
// databases of their own (distinct ids) make them with newGuardJob.
func appliedGuardJob(t *testing.T) *guardJob {
	t.Helper()
	return appliedFixture.get(t, func(t *testing.T) *guardJob {
		j := newGuardJob(t)
		j.apply()
		f := guardJobAt(t, fixtureDir(t, "applied"))
		copyDir(t, j.dir, f.dir)
		return f
	}).copy(t)
}

// changesFixture is the absolute path of fixtures/changes/<name>.
func changesFixture(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "fixtures", "changes", name))
	require.NoError(t, err)
	require.FileExists(t, p)
	return p
}

// input writes a jsonl input file in the job's folder and returns its path.
func (j *guardJob) input(name string, lines ...string) string {
	j.t.Helper()
	p := filepath.Join(j.dir, name)
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	require.NoError(j.t, os.WriteFile(p, []byte(b.String()), 0o644))
	return p
}

// callIdem is cli with its results in one value.
func callIdem(t *testing.T, args ...string) cliResult {
	t.Helper()
	code, stdout, stderr := cli(t, args...)
	return cliResult{code: code, stdout: stdout, stderr: stderr}
}

// run runs the job with args after "run JOB".
func (j *guardJob) run(args ...string) cliResult {
	j.t.Helper()
	return callIdem(j.t, append([]string{"run", j.file}, args...)...)
}

// apply runs the job with --json, requires exit 0 and returns the result.
func (j *guardJob) apply(args ...string) run.Result {
	j.t.Helper()
	r := j.run(append(args, "--json")...)
	require.Equal(j.t, 0, r.code, "run %v: stderr: %s", args, r.stderr)
	var res run.Result
	require.NoError(j.t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	return res
}

// refused runs the job, requires exit 3 and that nothing changed, and
// returns stderr.
func (j *guardJob) refused(args ...string) string {
	j.t.Helper()
	before := captureState(j.t, j.db)
	r := j.run(args...)
	require.Equal(j.t, job.ExitRefused, r.code, "run %v: stdout %s stderr %s", args, r.stdout, r.stderr)
	require.Equal(j.t, before, captureState(j.t, j.db), "a refused run changed the database")
	return r.stderr
}

// query runs read-only SQL against the job's database.
func (j *guardJob) query(sql string) [][]any {
	j.t.Helper()
	rows, err := ops.Query(context.Background(), j.db, sql, run.OpenOptions{})
	require.NoError(j.t, err)
	return rows.Values
}

// state is the job's state row: snapshot, cursor, epoch.
func (j *guardJob) state() (snapshot, cursor, epoch int64) {
	j.t.Helper()
	rows := j.query(`SELECT snapshot, cursor, epoch FROM idem.jobs WHERE job = '` + applyJobName + `'`)
	require.Len(j.t, rows, 1)
	return rows[0][0].(int64), rows[0][1].(int64), rows[0][2].(int64)
}

// dbState is every table of a database rendered as text, keyed by table:
// the targets, their outcomes and history, idem.ledger, idem.jobs (key,
// parts, snapshot, cursor, epoch), idem.snapshots, idem.released,
// idem.inputs, idem.erasures. The run log (idem.runs) is left out: a
// refused or failed run is recorded there by design; so is idem.commits,
// which holds the database's random id.
type dbState map[string]string

// captureState reads dbState from the database at path, read-only and
// without changing anything beside it (inspect). A database that does not
// exist yet is a state of its own.
func captureState(t *testing.T, path string) dbState {
	t.Helper()
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return dbState{"": "no database"}
	}
	state := dbState{}
	inspect(t, path, func(conn *sql.Conn) {
		ctx := context.Background()
		tables, err := queryStrings(ctx, conn, `SELECT schema_name || '.' || table_name FROM duckdb_tables()
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

// logEntries runs `idem log JOB --json`.
func (j *guardJob) log() []catalog.LogEntry {
	j.t.Helper()
	r := callIdem(j.t, "log", j.file, "--json")
	require.Equal(j.t, 0, r.code, r.stderr)
	var out struct {
		Job  string             `json:"job"`
		Runs []catalog.LogEntry `json:"runs"`
	}
	require.NoError(j.t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	require.Equal(j.t, applyJobName, out.Job)
	return out.Runs
}

func writeText(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}
