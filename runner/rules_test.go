package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	idemsql "github.com/idem-dev/idem/sql"
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
	job := writeJob(t, dir, vcRulesJob)
	db := openTestDB(t, dir)
	input := filepath.Join(dir, "b1.jsonl")
	require.NoError(t, os.WriteFile(input, []byte(`{"change_id":"c1","entity_id":"a","source_version":1,"operation":"upsert","value":"ok"}
{"change_id":"c2","entity_id":"test-1","source_version":1,"operation":"upsert","value":"toolongvalue"}
{"change_id":"c3","entity_id":"b","source_version":1,"operation":"upsert","value":"toolongvalue"}
{"change_id":"c4","entity_id":"c","source_version":1,"operation":"delete","value":null}
{"change_id":"","entity_id":"test-2","source_version":1,"operation":"upsert","value":"x"}
`), 0o644))
	res, err := db.Run(context.Background(), job, RunOptions{Input: input})
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
	require.NotEqual(t, string(canonicalJSON(with.config("jsonl"))), string(canonicalJSON(without.config("jsonl"))))
}

// TestRuleValidation: a bad rule is a job-file error (exit 2) that names
// the rule, found when the job is loaded.
func TestRuleValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, sql, want string
	}{
		{"unknown_column", "fare >= 0", `rule unknown_column: Binder Error: Referenced column "fare" not found`},
		{"two_statements", "true; DROP TABLE x", "';' is not allowed"},
		{"smuggled_clause", "true) FROM staged WHERE (true", "unbalanced parentheses"},
		{"smuggled_column", "entity_id) AS a, (1", "unbalanced parentheses"},
		{"comment", "true /* x", "not a SQL expression"},
		{"subquery", "entity_id IN (SELECT entity_id FROM customers)", "may not hold a subquery"},
		{"random", "random() < 0.5", "may not call random()"},
		{"clock", "current_timestamp IS NOT NULL", "may not read current_timestamp"},
		{"clock_call", "now() IS NOT NULL", "may not call now()"},
		{"not_boolean", "length(value)", "not BOOLEAN"},
		{"aggregate", "count(*) > 1", "rule aggregate:"},
		{"bad_syntax", "value >", "not a SQL expression"},
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
sql = '` + c.sql + `'
`
			require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
			_, err := LoadJob(path, idemsql.FS)
			require.Error(t, err)
			var jfe *JobFileError
			require.True(t, errors.As(err, &jfe), "%T %v", err, err)
			require.Equal(t, ExitUsage, ExitCode(err))
			require.Equal(t, 10, jfe.Line)
			require.Equal(t, "quality.rules[2]", jfe.Key)
			require.Contains(t, err.Error(), c.want)
		})
	}
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
			_, err := LoadJob(path, idemsql.FS)
			var jfe *JobFileError
			require.True(t, errors.As(err, &jfe), "%v", err)
			require.Equal(t, c.key, jfe.Key)
			require.Contains(t, err.Error(), c.want)
			require.Equal(t, c.noKey, errors.Is(err, ErrNoKey))
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
	job := writeJob(t, dir, text)
	db := openTestDB(t, dir)
	in := filepath.Join(dir, "a.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(`{"id": 1, "price": "12.345", "day": "2026-01-02"}`+"\n"+`{"id": 2, "price": "x", "day": "2026-01-02"}`+"\n"), 0o644))
	res, err := db.Run(context.Background(), job, RunOptions{Input: in})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"accepted": 1, "invalid_type:price": 1}, res.Outcomes)
	cols, err := targetColumns(context.Background(), db.SQL(), "t")
	require.NoError(t, err)
	require.Equal(t, []TargetColumn{{"id", "BIGINT"}, {"price", "DECIMAL(10,2)"}, {"day", "DATE"}, {"idem_status", "VARCHAR"}}, cols)

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
	require.Contains(t, res.Changed, PartSchema)
	require.Equal(t, []string{"1 12.35 ", "3 1.00 n"}, queryStrings(t, db.SQL(), `SELECT id || ' ' || price || ' ' || coalesce(note, '') FROM t ORDER BY id`))
}

// TestRulesOnRefreshPipeline: rules apply to the sample pipeline's typed
// staged columns too; a quarantined row leaves the target and keeps its
// outcome, and the counts balance.
func TestRulesOnRefreshPipeline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input, err := filepath.Abs("../fixtures/sample/occurrences-a.csv")
	require.NoError(t, err)
	job := writeJob(t, dir, `name = "sample"
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
	res, err := db.Run(context.Background(), job, RunOptions{})
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
	job := writeJob(t, dir, `name = "pairs"
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
	_, err := db.Run(ctx, job, RunOptions{Input: a})
	require.NoError(t, err)
	b := filepath.Join(dir, "b.csv")
	require.NoError(t, os.WriteFile(b, []byte("region,id,v,at\neu,1,x2,2\nus,1,old,0\n,3,nokey,1\n"), 0o644))
	res, err := db.Run(ctx, job, RunOptions{Input: b})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"accepted": 1, "stale": 1, "invalid_key": 1}, res.Outcomes)
	require.Equal(t, []string{"eu 1 x2", "eu 2 z", "us 1 y"}, queryStrings(t, db.SQL(), `SELECT region || ' ' || id || ' ' || v FROM pairs ORDER BY region, id`))
	cols, err := targetColumns(ctx, db.SQL(), "pairs")
	require.NoError(t, err)
	require.Equal(t, []string{"eu 1 x", "eu 2 z", "us 1 y"}, queryStrings(t, db.SQL(), `SELECT region || ' ' || id || ' ' || v FROM (`+PinnedSelect("pairs", cols, 1)+`) ORDER BY region, id`))
}
