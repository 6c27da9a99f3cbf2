package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/pipelines"
)

const vcRulesJob = `
name = "customers"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1

[input]
format = "jsonl"

[[quality.rules]]
name = "no_test_entities"
sql = "entity_id NOT LIKE 'test-%'"

[[quality.rules]]
name = "value_short"
sql = "length(value) <= 5"
`

// TestRulesQuarantineVersionedChanges: rules apply to a built-in pipeline's
// staged rows; the first failing rule names the outcome, a NULL result
// fails, rows that already failed a built-in check keep that reason, and
// accepted plus quarantined rows equal rows read.
func TestRulesQuarantineVersionedChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := writeJob(t, dir, vcRulesJob)
	db := openTestDB(t, dir)
	input := filepath.Join(dir, "b1.jsonl")
	require.NoError(t, os.WriteFile(input, []byte(`{"change_id":"c1","entity_id":"a","source_version":1,"operation":"upsert","value":"ok"}
{"change_id":"c2","entity_id":"test-1","source_version":1,"operation":"upsert","value":"toolongvalue"}
{"change_id":"c3","entity_id":"b","source_version":1,"operation":"upsert","value":"toolongvalue"}
{"change_id":"c4","entity_id":"c","source_version":1,"operation":"delete","value":null}
{"change_id":"","entity_id":"test-2","source_version":1,"operation":"upsert","value":"x"}
`), 0o644))
	res, err := db.Run(context.Background(), j, RunOptions{Input: input})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{
		"accepted":                      1,
		"invalid_change_id":             1,
		"invalid_rule:no_test_entities": 1,
		// c4 is a delete: length(NULL) <= 5 is NULL, which fails.
		"invalid_rule:value_short": 2,
	}, res.Outcomes)
	require.Equal(t, []string{
		"c1 accepted", "c2 invalid_rule:no_test_entities", "c3 invalid_rule:value_short",
		"c4 invalid_rule:value_short", " invalid_change_id",
	}, queryStrings(t, db.SQL(), `SELECT change_id || ' ' || outcome FROM customers_outcomes ORDER BY rowid`))
	require.Equal(t, []string{"a"}, queryStrings(t, db.SQL(), `SELECT entity_id FROM customers`))
	var n int64
	for _, c := range res.Outcomes {
		n += c
	}
	require.Equal(t, res.RowsIn, n)
}

// TestRulesAreInTheJobKey: adding a rule changes the config part.
func TestRulesAreInTheJobKey(t *testing.T) {
	t.Parallel()
	with := writeJob(t, t.TempDir(), vcRulesJob)
	without := writeJob(t, t.TempDir(), vcRulesJob[:len(vcRulesJob)-len(`
[[quality.rules]]
name = "value_short"
sql = "length(value) <= 5"
`)])
	require.Len(t, without.Rules, 1)
	require.NotEqual(t, string(jobkey.CanonicalJSON(with.Config("jsonl"))), string(jobkey.CanonicalJSON(without.Config("jsonl"))))
}

// TestRuleValidation: a rule that is not a deterministic expression of the
// staged row alone is a job-file error (exit 2) found when the job is
// loaded, naming the file, the rule's line, the rule and what is refused.
func TestRuleValidation(t *testing.T) {
	t.Parallel()
	const notListed = "not on idem's list of deterministic scalar functions a rule may call (string, math, regexp, date arithmetic)"
	cases := []struct {
		name, sql, want string
		exact           bool // want is the whole message after "rule <name>: "
	}{
		{"unknown_column", "fare >= 0", `Binder Error: Referenced column "fare" not found`, false},
		{"two_statements", "true; DROP TABLE x", "a rule is one SQL expression; ';' is not allowed", true},
		{"smuggled_clause", "true) FROM staged WHERE (true", "not a single SQL expression: unbalanced parentheses", true},
		{"smuggled_column", "entity_id) AS a, (1", "not a single SQL expression: unbalanced parentheses", true},
		{"comment", "true /* x", "not a SQL expression", false},
		{"bad_syntax", "value >", "not a SQL expression", false},
		{"not_boolean", "length(value)", "the expression is BIGINT, not BOOLEAN", true},
		// Settings, variables and the environment.
		{"setting", "current_setting('threads') = 2", "a rule may not call current_setting(): it reads a setting, a variable or the environment, not the row", true},
		{"env", "getenv('HOME') IS NOT NULL", "a rule may not call getenv(): it reads a setting, a variable or the environment, not the row", true},
		{"variable", "getvariable('idem_batch_id') = 'b1'", "a rule may not call getvariable(): it reads a setting, a variable or the environment, not the row", true},
		{"database", "current_database() = 'memory'", "a rule may not call current_database(): it reads a setting, a variable or the environment, not the row", true},
		{"user", "current_user = 'root'", "current_user is not a staged column (staged columns: ", false},
		// The clock and randomness.
		{"random", "random() < 0.5", "a rule may not call random(): the same row must always pass or fail", true},
		{"uuid", "uuid() IS NOT NULL", "a rule may not call uuid(): the same row must always pass or fail", true},
		{"sequence", "nextval('s') > 0", "a rule may not call nextval(): the same row must always pass or fail", true},
		{"clock", "current_timestamp IS NOT NULL", "a rule may not read current_timestamp: the same row must always pass or fail", true},
		{"clock_call", "now() IS NOT NULL", "a rule may not call now(): the same row must always pass or fail", true},
		{"today", "current_date > DATE '2020-01-01'", "a rule may not read current_date: the same row must always pass or fail", true},
		{"age", "age(TIMESTAMP '2020-01-01') > INTERVAL 1 DAY", "a rule may not call age(): " + notListed, true},
		// Failing the run, files and tables.
		{"error", "error('x') IS NULL", "a rule may not call error(): it would fail the run; a rule fails rows", true},
		{"file", "read_text('/etc/hostname') IS NOT NULL", "a rule may not call read_text(): it reads files or tables, not the row", true},
		{"glob", "glob('*') IS NOT NULL", "a rule may not call glob(): it reads files or tables, not the row", true},
		{"subquery", "entity_id IN (SELECT entity_id FROM customers)", "a rule may not hold a subquery: it checks one row's columns", true},
		{"exists", "EXISTS (SELECT 1)", "a rule may not hold a subquery: it checks one row's columns", true},
		{"other_table", "customers.entity_id = 'a'", "a rule may not read customers.entity_id: it reads only the staged row's columns", true},
		{"rowid", "rowid > 0", "rowid is not a staged column (staged columns: ", false},
		// Star expressions, aggregates, windows, lambdas, parameters.
		{"columns", "COLUMNS('.*') IS NOT NULL", "a rule may not hold * or COLUMNS(...): it names the columns it checks", true},
		{"aggregate", "count(*) > 1", "a rule may not call count_star(): " + notListed, true},
		{"sum", "sum(version) > 1", "a rule may not call sum(): " + notListed, true},
		{"window", "row_number() OVER () > 1", "a rule may not hold a window function: it checks one row's columns", true},
		{"lambda", "len(list_filter([value], x -> x = 'a')) > 0", "a rule may not call list_filter(): " + notListed, true},
		{"parameter", "value = ?", "a rule may not hold a parameter: it names the columns it checks", true},
		{"qualified_function", "main.my_macro(value)", "a rule may not call my_macro(): " + notListed, true},
		{"distinct_arg", "length(DISTINCT value) > 1", "a rule may not call length() with DISTINCT, FILTER or ORDER BY: it checks one row's columns", true},
		// Casts that depend on the time zone or fail the run on a value.
		{"time_zone", "value::TIMESTAMPTZ IS NOT NULL", "a rule may not cast to TIMESTAMP WITH TIME ZONE: the result depends on the TimeZone setting", true},
		{"cast", "CAST(value AS INTEGER) > 0", "a rule may not CAST a column to INTEGER: a value that does not convert would fail the whole run; use TRY_CAST (NULL fails the rule)", true},
		// Bound against staged's types and evaluated on a row.
		{"wrong_type", "value + 1 > 0", "Binder Error: No function matches the given name and argument types '+(VARCHAR, INTEGER_LITERAL)'", false},
		{"bad_constant", "version + 'x' > 0", "Conversion Error: Could not convert string 'x' to INT", false},
		{"bad_regexp", "regexp_matches(value, '[')", "missing ]", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "job.toml")
			text := `name = "customers"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1

[[quality.rules]]
name = "ok"
sql = "entity_id <> ''"

[[quality.rules]]
name = "` + c.name + `"
sql = ` + strconv.Quote(c.sql) + `
`
			require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
			_, err := LoadJob(path, pipelines.FS)
			require.Error(t, err)
			var jfe *report.JobFileError
			require.True(t, errors.As(err, &jfe), "%T %v", err, err)
			require.Equal(t, report.ExitUsage, report.ExitCode(err))
			require.Equal(t, 10, jfe.Line)
			require.Equal(t, "quality.rules[2]", jfe.Key)
			prefix := path + ":10: quality.rules[2]: rule " + c.name + ": "
			if c.exact {
				require.Equal(t, prefix+c.want, err.Error())
			} else {
				require.True(t, strings.HasPrefix(err.Error(), prefix), err.Error())
				require.Contains(t, err.Error(), c.want)
			}
		})
	}
}

// acceptedRules is one rule of each kind a rule may be: operators, LIKE,
// regexps, CASE, BETWEEN, IN, TRY_CAST, NULL handling, string, math, date
// arithmetic, a qualified column.
var acceptedRules = []job.Rule{
	{Name: "trimmed", SQL: "length(trim(value)) <= 5 OR value IS NULL"},
	{Name: "like", SQL: "entity_id NOT LIKE 'test-%' AND entity_id NOT ILIKE 'TMP%'"},
	{Name: "regexp", SQL: "regexp_full_match(coalesce(value, ''), '[a-z0-9]*')"},
	{Name: "try_cast", SQL: "TRY_CAST(value AS INTEGER) IS NULL OR TRY_CAST(value AS INTEGER) < 100"},
	{Name: "case", SQL: "CASE WHEN operation = 'delete' THEN value IS NULL ELSE value IS NOT NULL END"},
	{Name: "between", SQL: "version BETWEEN 1 AND 1000"},
	{Name: "in_list", SQL: "version % 10 NOT IN (7, 8)"},
	{Name: "math", SQL: "abs(version - 500) >= 1 AND round(sqrt(version), 2) > 0"},
	{Name: "dates", SQL: "make_date(2020, 1, 1) + TRY_CAST(version AS INTEGER) < DATE '2030-01-01' AND year(DATE '2020-01-01' + INTERVAL 1 DAY) = 2020"},
	{Name: "qualified", SQL: "staged.change_id <> upper(staged.change_id) OR nullif(change_id, '') IS NOT NULL"},
	{Name: "strings", SQL: "md5(entity_id) <> '' AND concat_ws('-', entity_id, change_id) NOT LIKE '%--%' AND split_part(coalesce(value, 'x'), 'z', 1) IS NOT NULL"},
}

// TestAcceptedRulesLoad: every accepted kind of rule loads.
func TestAcceptedRulesLoad(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("name = \"customers\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n")
	for _, r := range acceptedRules {
		fmt.Fprintf(&b, "\n[[quality.rules]]\nname = %q\nsql = %q\n", r.Name, r.SQL)
	}
	j := writeJob(t, t.TempDir(), b.String())
	require.Equal(t, acceptedRules, j.Rules)
}

// TestMergeByKeyJobValidation: the job-declared shape of merge_by_key is
// checked at load time.
func TestMergeByKeyJobValidation(t *testing.T) {
	t.Parallel()
	base := `name = "t"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
`
	cases := []struct {
		name, text, key, want string
		noKey                 bool
	}{
		{"no columns", base + "[target]\nkey = [\"id\"]\n", "input.columns", "takes its input columns from the job", false},
		{"bad type", base + "[input.columns]\nid = \"BIGINT); DROP TABLE x; --\"\n[target]\nkey = [\"id\"]\n", "input.columns.id", "is not one idem accepts", false},
		{"no key", base + "[input.columns]\nid = \"BIGINT\"\nv = \"VARCHAR\"\n[target]\ntable = \"t\"\n", "target.key", "needs the key columns", true},
		{"unknown key", base + "[input.columns]\nid = \"BIGINT\"\nv = \"VARCHAR\"\n[target]\nkey = [\"nope\"]\n", "target.key", `key column "nope" is not one of`, false},
		{"order is key", base + "[input.columns]\nid = \"BIGINT\"\nv = \"VARCHAR\"\n[target]\nkey = [\"id\"]\norder_by = \"id\"\n", "target.order_by", "is a key column", false},
		{"only key", base + "[input.columns]\nid = \"BIGINT\"\n[target]\nkey = [\"id\"]\n", "input.columns", "at least one column besides", false},
		{"reserved", base + "[input.columns]\nid = \"BIGINT\"\nidem_status = \"VARCHAR\"\n[target]\nkey = [\"id\"]\n", "input.columns.idem_status", "reserved", false},
		{"watermark type", base + "[input]\nchunk_rows = 10\nwatermark = \"v\"\n[input.columns]\nid = \"BIGINT\"\nv = \"VARCHAR\"\n[target]\nkey = [\"id\"]\n", "input.watermark", "a watermark is an integer column", false},
		{"files on refresh", "name = \"s\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\n[input]\nmode = \"files\"\n", "input.mode", "needs an apply pipeline", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "job.toml")
			require.NoError(t, os.WriteFile(path, []byte(c.text), 0o644))
			_, err := LoadJob(path, pipelines.FS)
			var jfe *report.JobFileError
			require.True(t, errors.As(err, &jfe), "%v", err)
			require.Equal(t, c.key, jfe.Key)
			require.Contains(t, err.Error(), c.want)
			require.Equal(t, c.noKey, errors.Is(err, report.ErrNoKey))
		})
	}
}

// TestMergeByKeyTypesAndColumnChange: declared types reach the target, and
// changing the declared columns rebuilds the target, carrying its rows.
func TestMergeByKeyTypesAndColumnChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	text := `name = "t"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
[input]
format = "jsonl"
[input.columns]
id = "bigint"
price = "DECIMAL(10, 2)"
day = "DATE"
[target]
key = ["id"]
`
	j := writeJob(t, dir, text)
	db := openTestDB(t, dir)
	in := filepath.Join(dir, "a.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(`{"id": 1, "price": "12.345", "day": "2026-01-02"}`+"\n"+`{"id": 2, "price": "x", "day": "2026-01-02"}`+"\n"), 0o644))
	res, err := db.Run(context.Background(), j, RunOptions{Input: in})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"accepted": 1, "invalid_type:price": 1}, res.Outcomes)
	cols, err := catalog.TargetColumns(context.Background(), db.SQL(), "t")
	require.NoError(t, err)
	require.Equal(t, []catalog.TargetColumn{{Name: "id", Type: "BIGINT"}, {Name: "price", Type: "DECIMAL(10,2)"}, {Name: "day", Type: "DATE"}, {Name: "idem_status", Type: "VARCHAR"}}, cols)

	changed := writeJob(t, dir, `name = "t"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
[input]
format = "jsonl"
[input.columns]
id = "BIGINT"
price = "DECIMAL(10, 2)"
day = "DATE"
note = "VARCHAR"
[target]
key = ["id"]
`)
	in2 := filepath.Join(dir, "b.jsonl")
	require.NoError(t, os.WriteFile(in2, []byte(`{"id": 3, "price": 1, "day": null, "note": "n"}`+"\n"), 0o644))
	res, err = db.Run(context.Background(), changed, RunOptions{Input: in2})
	require.NoError(t, err)
	require.Contains(t, res.Changed, jobkey.PartSchema)
	require.Equal(t, []string{"1 12.35 ", "3 1.00 n"}, queryStrings(t, db.SQL(), `SELECT id || ' ' || price || ' ' || coalesce(note, '') FROM t ORDER BY id`))
}

// TestRulesOnRefreshPipeline: rules apply to the sample pipeline's typed
// staged columns too; a quarantined row leaves the target and keeps its
// outcome, and the counts balance.
func TestRulesOnRefreshPipeline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input, err := filepath.Abs("../../fixtures/sample/occurrences-a.csv")
	require.NoError(t, err)
	j := writeJob(t, dir, `name = "sample"
pipeline = "sample"
transform_version = 1
schema_version = 1
[input]
path = "`+input+`"
[[quality.rules]]
name = "recent"
sql = "year IS NULL OR year >= 1970"
`)
	db := openTestDB(t, dir)
	res, err := db.Run(context.Background(), j, RunOptions{})
	require.NoError(t, err)
	var old, total int64
	require.NoError(t, db.SQL().QueryRow(`SELECT count(*) FILTER (WHERE TRY_CAST(year AS INTEGER) < 1970), count(*) FROM sample_outcomes WHERE outcome NOT LIKE 'invalid_%' OR outcome = 'invalid_rule:recent'`).Scan(&old, &total))
	require.Positive(t, old)
	require.Equal(t, old, res.Outcomes["invalid_rule:recent"])
	var kept int64
	require.NoError(t, db.SQL().QueryRow(`SELECT count(*) FROM sample WHERE year < 1970`).Scan(&kept))
	require.Zero(t, kept)
	var n int64
	for _, c := range res.Outcomes {
		n += c
	}
	require.Equal(t, res.RowsIn, n)
	require.Equal(t, int64(3000), res.RowsIn)
}

// TestMergeByKeyCompositeKey: a key of two columns upserts per pair and
// its history follows both columns.
func TestMergeByKeyCompositeKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := writeJob(t, dir, `name = "pairs"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
[input]
format = "csv"
[input.columns]
region = "VARCHAR"
id = "INTEGER"
v = "VARCHAR"
at = "BIGINT"
[target]
key = ["region", "id"]
order_by = "at"
`)
	db := openTestDB(t, dir)
	ctx := context.Background()
	a := filepath.Join(dir, "a.csv")
	require.NoError(t, os.WriteFile(a, []byte("region,id,v,at\neu,1,x,1\nus,1,y,1\neu,2,z,1\n"), 0o644))
	_, err := db.Run(ctx, j, RunOptions{Input: a})
	require.NoError(t, err)
	b := filepath.Join(dir, "b.csv")
	require.NoError(t, os.WriteFile(b, []byte("region,id,v,at\neu,1,x2,2\nus,1,old,0\n,3,nokey,1\n"), 0o644))
	res, err := db.Run(ctx, j, RunOptions{Input: b})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"accepted": 1, "stale": 1, "invalid_key": 1}, res.Outcomes)
	require.Equal(t, []string{"eu 1 x2", "eu 2 z", "us 1 y"}, queryStrings(t, db.SQL(), `SELECT region || ' ' || id || ' ' || v FROM pairs ORDER BY region, id`))
	cols, err := catalog.TargetColumns(ctx, db.SQL(), "pairs")
	require.NoError(t, err)
	require.Equal(t, []string{"eu 1 x", "eu 2 z", "us 1 y"}, queryStrings(t, db.SQL(), `SELECT region || ' ' || id || ' ' || v FROM (`+mustPinned(t, db.SQL(), "pairs", cols, 1)+`) ORDER BY region, id`))
}
