package cli

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// badInputEnv is the sandbox of one bad-input case: a database that already
// holds one committed run of each built-in pipeline and a bystander table y,
// and job files for both pipelines.
type badInputEnv struct {
	dir, db         string
	changes, sample string // job files
	root, fixtures  string
	batch1, sampleA string // fixture inputs
	writeFile       func(name, text string) string
	writeJob        func(name, text string) string
	baseChanges     string // job file text, for variants
}

// newBadInputEnv gives a case its own copy of the sandbox template (made
// Once, when template is empty, by running each job once).
func newBadInputEnv(t *testing.T, template string) *badInputEnv {
	t.Helper()
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	dir := t.TempDir()
	e := &badInputEnv{dir: dir, db: filepath.Join(dir, "idem.duckdb"), root: root, fixtures: filepath.Join(root, "fixtures")}
	e.batch1 = filepath.Join(e.fixtures, "changes", "batch-1.jsonl")
	e.sampleA = filepath.Join(e.fixtures, "sample", "occurrences-a.csv")
	e.writeFile = func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	e.writeJob = e.writeFile
	e.baseChanges = fmt.Sprintf("name = \"customer_state\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\npath = %q\n[target]\ntable = \"customer_state\"\n", e.batch1)
	e.changes = filepath.Join(dir, "changes.toml")
	e.sample = filepath.Join(dir, "sample.toml")
	if template != "" {
		clitest.CopyDir(t, template, dir)
		return e
	}
	// The jobs that run end with [duckdb] threads = 1, as the other tests'
	// do; the variants of baseChanges fail before opening a database.
	e.writeJob("changes.toml", e.baseChanges+clitest.DuckdbSection)
	e.writeJob("sample.toml", fmt.Sprintf("name = \"sample\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\n[input]\npath = %q\n[target]\ntable = \"occurrence_sample\"\n[params]\ncap = 40\n", e.sampleA)+clitest.DuckdbSection)
	for _, job := range []string{e.changes, e.sample} {
		code, _, stderr := runMain(t, "run", job, "--db", e.db)
		require.Equal(t, 0, code, stderr)
	}
	clitest.ExecSQL(t, e.db, `CREATE TABLE y (a INTEGER); INSERT INTO y VALUES (42)`)
	return e
}

func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// queryRows reads a one-column text query from the database at dbPath.
func queryRows(t *testing.T, dbPath, q string) []string {
	t.Helper()
	return clitest.QueryStrs(t, dbPath, q)
}

const changeRow = `{"change_id":%q,"entity_id":%q,"source_version":%s,"operation":"upsert","value":%q}` + "\n"

// TestBadInput feeds the CLI bad input of every kind and asserts the exit
// code, the message, and that nothing was committed (the database's whole
// state is unchanged) or, for input that is valid after all, what was.
func TestBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// args builds the command line in the case's sandbox.
		args func(t *testing.T, e *badInputEnv) []string
		code int
		msg  []string // each must appear in stderr (or stdout when code is 0)
		// commits is true for input that is valid: then check runs instead
		// of the nothing-committed assertion.
		commits bool
		check   func(t *testing.T, e *badInputEnv, stdout string)
	}{
		{
			name: "malformed JSON on line 3",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("bad.jsonl", fmt.Sprintf(changeRow, "n1", "e1", "1", "a")+fmt.Sprintf(changeRow, "n2", "e2", "1", "b")+
					`{"change_id":"n3","entity_id":`+"\n"+fmt.Sprintf(changeRow, "n4", "e4", "1", "d"))
				return []string{"run", e.changes, "--input", in}
			},
			code: 1, msg: []string{"bad.jsonl: line 3: malformed JSON"},
		},
		{
			name: "wrong type is the row's outcome invalid_version",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("seven.jsonl", fmt.Sprintf(changeRow, "n1", "e1", `"seven"`, "a")+fmt.Sprintf(changeRow, "n2", "e2", "7", "b"))
				return []string{"run", e.changes, "--input", in, "--json"}
			},
			code: 0, commits: true, msg: []string{`"decision":"applied"`, `"invalid_version":1`, `"accepted":1`},
			check: func(t *testing.T, e *badInputEnv, _ string) {
				require.Equal(t, []string{"n1 seven invalid_version", "n2 7 accepted"},
					queryRows(t, e.db, `SELECT concat_ws(' ', change_id, source_version, outcome) FROM customer_state_outcomes WHERE batch_id = 'seven.jsonl' ORDER BY change_id`))
			},
		},
		{
			name: "missing CSV column",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("missing.csv", "id,species_id,license\n1,2,CC0 1.0\n")
				return []string{"run", e.sample, "--input", in}
			},
			code: 1, msg: []string{"missing.csv", `missing column "year"`},
		},
		{
			name: "missing JSONL field is null, the row's outcome invalid_payload",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("nofield.jsonl", `{"change_id":"n1","entity_id":"e1","source_version":1,"operation":"upsert"}`+"\n")
				return []string{"run", e.changes, "--input", in, "--json"}
			},
			code: 0, commits: true, msg: []string{`"outcomes":{"invalid_payload":1}`},
		},
		{
			name: "extra CSV column",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("extra.csv", "id,species_id,year,license,extra\n1,2,2000,CC0 1.0,z\n")
				return []string{"run", e.sample, "--input", in}
			},
			code: 1, msg: []string{"extra.csv", `unexpected column "extra"`},
		},
		{
			name: "extra JSONL field",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("extra.jsonl", fmt.Sprintf(changeRow, "n1", "e1", "1", "a")+
					`{"change_id":"n2","entity_id":"e2","source_version":1,"operation":"upsert","value":"b","colour":"red"}`+"\n")
				return []string{"run", e.changes, "--input", in}
			},
			code: 1, msg: []string{"extra.jsonl", `unexpected field "colour"`},
		},
		{
			name: "empty JSONL file is a valid empty batch",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.changes, "--input", e.writeFile("empty.jsonl", ""), "--json"}
			},
			code: 0, commits: true, msg: []string{`"decision":"applied"`, `"rows_in":0`, `"snapshot":2`},
			check: func(t *testing.T, e *badInputEnv, _ string) {
				require.Equal(t, []string{"empty.jsonl 0 2"}, queryRows(t, e.db, `SELECT concat_ws(' ', batch_id, rows_in, snapshot) FROM idem.ledger WHERE batch_id = 'empty.jsonl'`))
			},
		},
		{
			name: "empty CSV file is a valid empty snapshot",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.sample, "--input", e.writeFile("empty.csv", ""), "--json"}
			},
			code: 0, commits: true, msg: []string{`"decision":"loaded"`, `"rows_in":0`, `"rows_out":0`},
		},
		{
			name: "missing file",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.changes, "--input", filepath.Join(e.dir, "nope.jsonl")}
			},
			code: 1, msg: []string{"nope.jsonl", "no such file or directory"},
		},
		{
			name: "directory",
			args: func(t *testing.T, e *badInputEnv) []string {
				d := filepath.Join(e.dir, "adir.jsonl")
				require.NoError(t, os.Mkdir(d, 0o755))
				return []string{"run", e.changes, "--input", d}
			},
			code: 1, msg: []string{"adir.jsonl: is a directory"},
		},
		{
			name: "file without read permission",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("locked.jsonl", fmt.Sprintf(changeRow, "n1", "e1", "1", "a"))
				require.NoError(t, os.Chmod(in, 0o000))
				if f, err := os.Open(in); err == nil {
					f.Close()
					t.Skip("running as root (or with CAP_DAC_OVERRIDE): mode 000 does not stop reads; the read-error case covers a file that cannot be read")
				}
				return []string{"run", e.changes, "--input", in}
			},
			code: 1, msg: []string{"locked.jsonl", "permission denied"},
		},
		{
			name: "file whose read fails (EIO)",
			args: func(t *testing.T, e *badInputEnv) []string {
				// /proc/self/mem opens, stats as a regular file, and fails its
				// first read with EIO, whoever the user is.
				if _, err := os.Stat("/proc/self/mem"); err != nil {
					t.Skip("no /proc/self/mem")
				}
				in := filepath.Join(e.dir, "unreadable.jsonl")
				require.NoError(t, os.Symlink("/proc/self/mem", in))
				return []string{"run", e.changes, "--input", in}
			},
			code: 1, msg: []string{"unreadable.jsonl", "input/output error"},
		},
		{
			name: "invalid UTF-8 in JSONL",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("latin1.jsonl", fmt.Sprintf(changeRow, "n1", "e1", "1", "a")+
					"{\"change_id\":\"n2\",\"entity_id\":\"e2\",\"source_version\":1,\"operation\":\"upsert\",\"value\":\"caf\xe9\"}\n")
				return []string{"run", e.changes, "--input", in}
			},
			code: 1, msg: []string{"latin1.jsonl: line 2: malformed JSON: invalid UTF-8"},
		},
		{
			name: "invalid UTF-8 in CSV",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("latin1.csv", "id,species_id,year,license\n1,2,2000,CC0 1.0\n2,3,2001,caf\xe9\n")
				return []string{"run", e.sample, "--input", in}
			},
			code: 1, msg: []string{"latin1.csv: line 3: Invalid unicode"},
		},
		{
			name: "10 MB single JSONL line",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("big.jsonl", fmt.Sprintf(changeRow, "n1", "big", "1", strings.Repeat("x", 10<<20)))
				return []string{"run", e.changes, "--input", in, "--json"}
			},
			code: 0, commits: true, msg: []string{`"outcomes":{"accepted":1}`},
			check: func(t *testing.T, e *badInputEnv, _ string) {
				require.Equal(t, []string{"10485760"}, queryRows(t, e.db, `SELECT CAST(length(value) AS VARCHAR) FROM customer_state WHERE entity_id = 'big'`))
			},
		},
		{
			name: "40 MB JSONL line is past the limit",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("huge.jsonl", fmt.Sprintf(changeRow, "n1", "e1", "1", "a")+fmt.Sprintf(changeRow, "n2", "huge", "1", strings.Repeat("x", 40<<20)))
				return []string{"run", e.changes, "--input", in}
			},
			code: 1, msg: []string{"huge.jsonl: line 2: a JSON object longer than"},
		},
		{
			// DuckDB's CSV reader buffers 16 lines of max_line_size (2 MB by
			// default); raising the limit costs that memory on every read.
			name: "10 MB single CSV line",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("big.csv", "id,species_id,year,license\n1,2,2000,"+strings.Repeat("x", 10<<20)+"\n")
				return []string{"run", e.sample, "--input", in}
			},
			code: 1, msg: []string{"big.csv: line 2: Maximum line size of 2000000 bytes exceeded"},
		},
		{
			name: "job file syntax error names file and line",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("syntax.toml", e.baseChanges+"format = jsonl\n")}
			},
			code: 2, msg: []string{"syntax.toml:9:"},
		},
		{
			name: "unknown key names it and its line",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("unknown.toml", strings.Replace(e.baseChanges, "[target]", "fromat = \"jsonl\"\n[target]", 1))}
			},
			code: 2, msg: []string{"unknown.toml:7: input.fromat: unknown key"},
		},
		{
			name: "param of the wrong type",
			args: func(t *testing.T, e *badInputEnv) []string {
				text, err := os.ReadFile(e.sample)
				require.NoError(t, err)
				return []string{"run", e.writeJob("param.toml", strings.Replace(string(text), "cap = 40", `cap = "forty"`, 1))}
			},
			code: 2, msg: []string{"param.toml:10: params.cap: want integer, found a string \"forty\""},
		},
		{
			name: "absurd thread count is refused",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.changes, "--threads", "100000"}
			},
			code: 2, msg: []string{"threads 100000: at most 1024"},
		},
		{
			name: "absurd thread count in the job file names its line",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("threads.toml", e.baseChanges+"[duckdb]\nthreads = 100000\n")}
			},
			code: 2, msg: []string{"threads.toml:10: duckdb.threads: must be a positive integer of at most 1024"},
		},
		{
			name: "retention keep_snapshots of zero names its line",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("keep.toml", e.baseChanges+"[retention]\nkeep_snapshots = 0\n")}
			},
			code: 2, msg: []string{"keep.toml:10: retention.keep_snapshots: must be a positive integer (got 0)"},
		},
		{
			name: "retention checkpoint_every below one names its line",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("every.toml", e.baseChanges+"[retention]\nkeep_snapshots = 3\ncheckpoint_every = -1\n")}
			},
			code: 2, msg: []string{"every.toml:11: retention.checkpoint_every: must be a positive integer (got -1)"},
		},
		{
			name: "stream input: bad settings name their line and key",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", streamJob("kafka", `max_wait = "soon"`))}
			},
			code: 2, msg: []string{`stream.toml:9: input.max_wait: must be a positive duration such as "2s" or "500ms" (got "soon")`},
		},
		{
			name: "stream input: zero max_records",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", streamJob("kafka", "max_records = 0"))}
			},
			code: 2, msg: []string{"stream.toml:9: input.max_records: must be a positive number of records (got 0)"},
		},
		{
			name: "stream input: max_record_bytes out of range",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", streamJob("kafka", "max_record_bytes = 0"))}
			},
			code: 2, msg: []string{"stream.toml:9: input.max_record_bytes: must be between 1 and 1073741824 bytes (got 0)"},
		},
		{
			name: "stream input: events on a kafka topic",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", streamJob("kafka", `events = ["change"]`))}
			},
			code: 2, msg: []string{`stream.toml:9: input.events: events applies to kind = "sse"`},
		},
		{
			name: "stream input: csv format",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", streamJob("kafka", `format = "csv"`))}
			},
			code: 2, msg: []string{`stream.toml:9: input.format: a stream input reads format = "jsonl"`},
		},
		{
			name: "stream input: unknown kind",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", streamJob("kinesis", ""))}
			},
			code: 2, msg: []string{`stream.toml:6: input.kind: must be "kafka" or "sse", or absent for files (got "kinesis")`},
		},
		{
			name: "stream input: bad start",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", streamJob("kafka", `start = "middle"`))}
			},
			code: 2, msg: []string{`stream.toml:9: input.start: must be "earliest" or "latest" (got "middle")`},
		},
		{
			name: "stream input: brokers on a files input",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", strings.Replace(e.baseChanges, "[target]", "brokers = [\"127.0.0.1:9092\"]\n[target]", 1))}
			},
			code: 2, msg: []string{`stream.toml:7: input.brokers: brokers applies to a stream input: set kind = "kafka" or "sse"`},
		},
		{
			name: "stream input: sse without url",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", "name = \"prices\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\nkind = \"sse\"\n")}
			},
			code: 2, msg: []string{`stream.toml:5: input.url: an sse input needs url = "http://..."`},
		},
		{
			name: "stream input: a refresh pipeline is refused",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", "name = \"sample\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\n[input]\nkind = \"kafka\"\nbrokers = [\"127.0.0.1:9092\"]\ntopic = \"occ\"\n[target]\ntable = \"occurrence_sample\"\n[params]\ncap = 40\n")}
			},
			code: 2, msg: []string{"stream.toml:6: input.kind: a stream input needs an apply pipeline", "sample is a refresh pipeline"},
		},
		{
			name: "stream input: a path beside a topic",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("stream.toml", streamJob("kafka", `path = "x.jsonl"`))}
			},
			code: 2, msg: []string{"stream.toml:9: input.path: a stream input reads its topic, not files: remove path"},
		},
		{
			name: "unknown retention key is refused",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("keepall.toml", e.baseChanges+"[retention]\nkeep_days = 3\n")}
			},
			code: 2, msg: []string{"keepall.toml:10: retention.keep_days: unknown key"},
		},
		{
			name: "hostile table name is refused, never executed",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.writeJob("hostile.toml", strings.Replace(e.baseChanges, `table = "customer_state"`, `table = 'x"; DROP TABLE y; --'`, 1))}
			},
			code: 2, msg: []string{"hostile.toml:8: target.table: must be a table name"},
		},
		{
			name: "hostile batch id is bound as a value",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.changes, "--input", filepath.Join(e.fixtures, "changes", "batch-2.jsonl"), "--batch-id", `x'); DROP TABLE y; --`}
			},
			code: 0, commits: true, msg: []string{"applied"},
			check: func(t *testing.T, e *badInputEnv, _ string) {
				require.Equal(t, []string{`x'); DROP TABLE y; --`}, queryRows(t, e.db, `SELECT batch_id FROM idem.ledger WHERE snapshot = 2`))
			},
		},
		{
			name: "hostile CSV header is refused",
			args: func(t *testing.T, e *badInputEnv) []string {
				in := e.writeFile("hostile.csv", "id,species_id,year,\"license\"\"}); DROP TABLE y; --\"\n1,2,2000,CC0 1.0\n")
				return []string{"run", e.sample, "--input", in}
			},
			code: 1, msg: []string{"hostile.csv", "unexpected column"},
		},
		{
			name: "pipeline folder outside via ..",
			args: func(t *testing.T, e *badInputEnv) []string {
				e.writeFile("outside/pipe/pipeline.toml", "name = \"pipe\"\nmode = \"refresh\"\ncolumns = [{ name = \"a\", type = \"VARCHAR\" }]\n")
				e.writeFile("outside/pipe/transform/v1/01_stage.sql", "CREATE TEMP TABLE staged AS SELECT * FROM input;\n")
				e.writeFile("outside/pipe/schema/v1.sql", "CREATE OR REPLACE TABLE {{table}} (a VARCHAR);\n")
				job := e.writeJob("jobs/dotdot.toml", "name = \"pipe\"\npipeline = \"../outside/pipe\"\ntransform_version = 1\nschema_version = 1\n[input]\npath = \"a.csv\"\n")
				return []string{"run", job}
			},
			code: 2, msg: []string{"dotdot.toml:2: pipeline:", "lies outside the job file's folder"},
		},
		{
			// A writing command creates the folder (TestDatabaseFolderCreated);
			// a reading one never creates anything.
			name: "read-only command on a database in a folder that does not exist",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"log", e.changes, "--db", filepath.Join(e.dir, "nope", "idem.duckdb")}
			},
			code: 1, msg: []string{"nope does not exist"},
			check: func(t *testing.T, e *badInputEnv, _ string) {
				require.NoDirExists(t, filepath.Join(e.dir, "nope"))
			},
		},
		{
			name: "database path with a quote",
			args: func(t *testing.T, e *badInputEnv) []string {
				return []string{"run", e.changes, "--db", filepath.Join(e.dir, "it's'); DROP TABLE y; --.duckdb")}
			},
			code: 0, msg: []string{"applied (first load)"},
			check: func(t *testing.T, e *badInputEnv, _ string) {
				require.FileExists(t, filepath.Join(e.dir, "it's'); DROP TABLE y; --.duckdb"))
			},
		},
	}
	template := newBadInputEnv(t, "").dir
	// Every case starts from a copy of the template: its state before.
	templateDB := filepath.Join(template, "idem.duckdb")
	before := clitest.DumpState(t, templateDB)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newBadInputEnv(t, template)
			args := tc.args(t, e)
			if !containsFlag(args, "--db") {
				args = append(args, "--db", e.db)
			}
			code, stdout, stderr := runMain(t, args...)
			require.Equal(t, tc.code, code, "exit code; stderr: %s", stderr)
			out := stderr
			if code == 0 {
				out = stdout
			} else {
				require.NotContains(t, stderr, "panic")
				require.Equal(t, 1, strings.Count(stderr, "\n"), "one line of error: %q", stderr)
			}
			for _, m := range tc.msg {
				require.Contains(t, out, m)
			}
			// A database file and WAL byte for byte the template's hold its
			// state, y included, without reading them.
			after, y := before, []string{"42"}
			if !clitest.SameFile(t, e.db, templateDB) || !clitest.SameFile(t, e.db+".wal", templateDB+".wal") {
				clitest.Inspect(t, e.db, func(conn *sql.Conn) {
					var err error
					after, err = clitest.DumpDB(context.Background(), conn)
					require.NoError(t, err)
					y, err = clitest.QueryStrings(context.Background(), conn, `SELECT CAST(a AS VARCHAR) FROM y`)
					require.NoError(t, err)
				})
			}
			if !tc.commits {
				require.True(t, before == after, "something was committed: %s", clitest.FirstDiff(before, after))
			} else {
				require.NotEqual(t, before, after, "valid input committed nothing")
			}
			require.Equal(t, []string{"42"}, y, "bystander table y")
			if tc.check != nil {
				tc.check(t, e, stdout)
			}
		})
	}
}

func containsFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag {
			return true
		}
	}
	return false
}

// streamJob is a versioned_changes job file reading a stream of kind, with
// extra as line 9 of its [input] table.
func streamJob(kind, extra string) string {
	return fmt.Sprintf("name = \"rides\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\nkind = %q\nbrokers = [\"127.0.0.1:9092\"]\ntopic = \"rides\"\n%s\n[target]\ntable = \"rides\"\n", kind, extra)
}
