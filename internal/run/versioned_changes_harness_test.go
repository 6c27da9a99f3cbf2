package run_test

// Shared harness of the versioned_changes tests: a job bound to a fresh
// database in t.TempDir(), batches written as files and applied with the
// real runner, and readers of the target, the active view and the outcomes.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/pipelines"
)

// vcTable is the target table of every versioned_changes test job.
const vcTable = "vc_state"

// vcEnv is one versioned_changes job on its own database.
type vcEnv struct {
	t   testing.TB
	dir string
	j   *job.Job
	db  *run.DB
	n   int // files written so far
}

// newVCEnv writes a job file into a fresh temp dir and opens its database.
// The database uses one DuckDB thread: the batches are tiny and the property
// test runs scenarios side by side.
func newVCEnv(t testing.TB) *vcEnv {
	t.Helper()
	dir := t.TempDir()
	jobPath := filepath.Join(dir, "job.toml")
	text := fmt.Sprintf(`name = "vc"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = %q

[target]
table = %q

[duckdb]
threads = 1
`, filepath.Join(dir, "idem.duckdb"), vcTable)
	require.NoError(t, os.WriteFile(jobPath, []byte(text), 0o644))
	return newVCEnvAt(t, jobPath)
}

// newVCEnvAt loads the job file at jobPath and opens its database; input
// files are written beside the job file.
func newVCEnvAt(t testing.TB, jobPath string) *vcEnv {
	t.Helper()
	j, err := run.LoadJob(jobPath, pipelines.FS)
	require.NoError(t, err)
	db, err := run.Open(context.Background(), j.Database, run.OpenOptions{DuckDB: j.DuckDB})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return &vcEnv{t: t, dir: filepath.Dir(jobPath), j: j, db: db}
}

// file writes data as the next input file with the given extension and
// returns its path.
func (e *vcEnv) file(ext string, data []byte) string {
	e.t.Helper()
	e.n++
	path := filepath.Join(e.dir, fmt.Sprintf("in-%03d.%s", e.n, ext))
	require.NoError(e.t, os.WriteFile(path, data, 0o644))
	return path
}

// apply runs the job once on input under batch id.
func (e *vcEnv) apply(input, batchID string) (*run.Result, error) {
	return e.db.Run(context.Background(), e.j, run.RunOptions{Input: input, BatchID: batchID})
}

// mustApply applies a batch that must commit.
func (e *vcEnv) mustApply(input, batchID string) *run.Result {
	e.t.Helper()
	res, err := e.apply(input, batchID)
	require.NoError(e.t, err, "apply %s as %s", input, batchID)
	require.Equal(e.t, report.DecisionApplied, res.Decision)
	return res
}

// applyRows writes rows as JSON Lines and applies them under batch id.
func (e *vcEnv) applyRows(batchID string, rows ...vcRow) *run.Result {
	e.t.Helper()
	return e.mustApply(e.file("jsonl", vcJSONL(rows)), batchID)
}

// vcStored is one target row, or one row of the model's state.
type vcStored struct {
	Entity  string
	Version int64
	Status  string
	Value   *string
}

func (s vcStored) String() string {
	return fmt.Sprintf("%q v%d %s %s", s.Entity, s.Version, s.Status, vcShowText(s.Value))
}

// state reads the target in entity order and asserts one row per entity.
func (e *vcEnv) state() []vcStored {
	e.t.Helper()
	return e.readStored(`SELECT entity_id, source_version, status, value FROM ` + vcTable + ` ORDER BY entity_id`)
}

// active reads the _active view in entity order.
func (e *vcEnv) active() []vcStored {
	e.t.Helper()
	return e.readStored(`SELECT entity_id, source_version, 'active', value FROM ` + vcTable + `_active ORDER BY entity_id`)
}

func (e *vcEnv) readStored(query string) []vcStored {
	e.t.Helper()
	rows, err := e.db.SQL().QueryContext(context.Background(), query)
	require.NoError(e.t, err)
	defer rows.Close()
	out := []vcStored{}
	for rows.Next() {
		var s vcStored
		var v sql.NullString
		require.NoError(e.t, rows.Scan(&s.Entity, &s.Version, &s.Status, &v))
		if v.Valid {
			s.Value = &v.String
		}
		if n := len(out); n > 0 {
			require.NotEqual(e.t, out[n-1].Entity, s.Entity, "two rows for one entity")
		}
		out = append(out, s)
	}
	require.NoError(e.t, rows.Err())
	return out
}

// vcOutcome is one stored outcome row: the input row as received (text) and
// its outcome.
type vcOutcome struct {
	Row     vcText
	Outcome string
}

func (o vcOutcome) String() string { return o.Row.String() + " -> " + o.Outcome }

// outcomes reads the outcomes of one batch, sorted so that they compare as a
// multiset (the outcome of a row depends only on its content and its batch).
func (e *vcEnv) outcomes(batchID string) []vcOutcome {
	e.t.Helper()
	rows, err := e.db.SQL().QueryContext(context.Background(),
		`SELECT change_id, entity_id, source_version, operation, value, outcome FROM `+vcTable+`_outcomes WHERE batch_id = ?`, batchID)
	require.NoError(e.t, err)
	defer rows.Close()
	out := []vcOutcome{}
	for rows.Next() {
		var f [5]sql.NullString
		var o vcOutcome
		require.NoError(e.t, rows.Scan(&f[0], &f[1], &f[2], &f[3], &f[4], &o.Outcome))
		for i := range f {
			if f[i].Valid {
				o.Row[i] = &f[i].String
			}
		}
		out = append(out, o)
	}
	require.NoError(e.t, rows.Err())
	vcSortOutcomes(out)
	return out
}

// outcomeRowCount counts every stored outcome row.
func (e *vcEnv) outcomeRowCount() int64 {
	e.t.Helper()
	var n int64
	require.NoError(e.t, e.db.SQL().QueryRowContext(context.Background(), `SELECT count(*) FROM `+vcTable+`_outcomes`).Scan(&n))
	return n
}

func vcSortOutcomes(out []vcOutcome) {
	sort.SliceStable(out, func(i, j int) bool { return out[i].String() < out[j].String() })
}

// vcText is an input row as DuckDB reads it: five nullable text fields in
// the order change_id, entity_id, source_version, operation, value.
type vcText [5]*string

func (r vcText) String() string {
	parts := make([]string, len(r))
	for i, p := range r {
		parts[i] = vcShowText(p)
	}
	return strings.Join(parts, " | ")
}

func vcShowText(p *string) string {
	if p == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *p)
}

// vcColumns are the input columns in file order.
var vcColumns = [5]string{"change_id", "entity_id", "source_version", "operation", "value"}

// vcRow is one input row as written to a JSON Lines file: each field is a
// JSON literal, or "" to leave the field out. Only literals whose text
// DuckDB reads back unchanged are used (strings, integers, null, and
// decimals such as 1.5 with no trailing zero).
type vcRow [5]string

// vcJSONStr is the JSON literal of a string.
func vcJSONStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// vcChange is a row with every field given as a JSON string except a nil
// value, the common case of the named tests.
func vcChange(changeID, entity string, version int64, op string, value *string) vcRow {
	v := "null"
	if value != nil {
		v = vcJSONStr(*value)
	}
	return vcRow{vcJSONStr(changeID), vcJSONStr(entity), fmt.Sprint(version), vcJSONStr(op), v}
}

func vcStrp(s string) *string { return &s }

// text is the row as DuckDB reads it with every column typed VARCHAR.
func (r vcRow) text() vcText {
	var out vcText
	for i, lit := range r {
		switch {
		case lit == "" || lit == "null":
		case strings.HasPrefix(lit, `"`):
			var s string
			if err := json.Unmarshal([]byte(lit), &s); err != nil {
				panic(err)
			}
			out[i] = &s
		default:
			s := lit
			out[i] = &s
		}
	}
	return out
}

// vcJSONL renders rows as JSON Lines.
func vcJSONL(rows []vcRow) []byte {
	var b strings.Builder
	for _, r := range rows {
		b.WriteByte('{')
		first := true
		for i, lit := range r {
			if lit == "" {
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteString(vcJSONStr(vcColumns[i]))
			b.WriteByte(':')
			b.WriteString(lit)
		}
		b.WriteString("}\n")
	}
	return []byte(b.String())
}
