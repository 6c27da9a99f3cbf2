package run_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/pipelines"
)

// A pipeline that declares its outcomes table is held to the rows it
// stores there: a commit step that stores one outcome too few or too many,
// or files them under another batch id, is refused before COMMIT even when
// its outcomes view is right, and nothing is committed. A pipeline that
// declares no outcomes table is held to its outcomes relation.
func TestStoredOutcomesMustBalance(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, pipeline, input, edit, want string
		step                              string // default 04_commit.sql
		undeclared                        bool   // remove outcomes_table from pipeline.toml
	}{
		{
			name: "one row too few", pipeline: "versioned_changes", input: "fixtures/changes/batch-1.jsonl",
			edit: "DELETE FROM {{table:_outcomes}} WHERE rowid = (SELECT max(rowid) FROM {{table:_outcomes}});",
			want: "outcomes do not balance: 15 rows staged, 14 outcomes (stored in bal_outcomes for batch batch-1.jsonl); nothing committed",
		},
		{
			name: "one row twice", pipeline: "versioned_changes", input: "fixtures/changes/batch-1.jsonl",
			edit: "INSERT INTO {{table:_outcomes}} SELECT * FROM {{table:_outcomes}} LIMIT 1;",
			want: "outcomes do not balance: 15 rows staged, 16 outcomes (stored in bal_outcomes for batch batch-1.jsonl); nothing committed",
		},
		{
			name: "another batch id", pipeline: "versioned_changes", input: "fixtures/changes/batch-1.jsonl",
			edit: "UPDATE {{table:_outcomes}} SET batch_id = 'elsewhere';",
			want: "outcomes do not balance: 15 rows staged, 0 outcomes (stored in bal_outcomes for batch batch-1.jsonl); nothing committed",
		},
		{
			name: "refresh: one row too few", pipeline: "sample", input: "fixtures/sample/occurrences-a.csv",
			edit: "DELETE FROM {{table:_outcomes}} WHERE rowid = (SELECT min(rowid) FROM {{table:_outcomes}});",
			want: "outcomes do not balance: 3000 rows staged, 2999 outcomes (stored in bal_outcomes); nothing committed",
		},
		{
			name: "generic pipeline: one row too few", pipeline: "merge_by_key", input: "fixtures/trips/2026-01-01.jsonl",
			edit: "DELETE FROM {{table:_outcomes}} WHERE rowid = (SELECT min(rowid) FROM {{table:_outcomes}});",
			want: "outcomes do not balance: 6 rows staged, 5 outcomes (stored in bal_outcomes for batch 2026-01-01.jsonl); nothing committed",
		},
		{
			name: "undeclared: the outcomes relation is counted", pipeline: "sample", input: "fixtures/sample/occurrences-a.csv",
			step: "03_outcomes.sql", undeclared: true,
			edit: "DELETE FROM outcomes WHERE rowid = (SELECT min(rowid) FROM outcomes);",
			want: "outcomes do not balance: 3000 rows staged, 2999 outcomes (in the outcomes relation); nothing committed",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			pipe := filepath.Join(dir, "p")
			copyPipeline(t, tc.pipeline, pipe)
			step := tc.step
			if step == "" {
				step = "04_commit.sql"
			}
			if tc.undeclared {
				toml := filepath.Join(pipe, "pipeline.toml")
				data, err := os.ReadFile(toml)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(toml, []byte(replaceOnce(t, string(data), `outcomes_table = "_outcomes"`, "")), 0o644))
			}
			file := filepath.Join(pipe, "transform", "v1", step)
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(file, append(data, "\n"+tc.edit+"\n"...), 0o644))
			j, err := run.LoadJob(writeJob(t, dir, balanceJob(t, tc.pipeline, pipe, dir, tc.input)), pipelines.FS)
			require.NoError(t, err)
			db := openDB(t, j.Database)
			_, err = db.Run(ctx, j, run.RunOptions{})
			require.ErrorContains(t, err, tc.want)
			require.False(t, errors.Is(err, report.ErrRefused), "an unbalanced pipeline is a failure, not a refusal")
			rows, err := db.Query(ctx, `SELECT (SELECT count(*) FROM idem.snapshots), (SELECT count(*) FROM idem.ledger),
				(SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main')`)
			require.NoError(t, err)
			require.Equal(t, [][]any{{int64(0), int64(0), int64(0)}}, rows.Values, "nothing committed: no snapshot, no ledger row, no table")
		})
	}
}

func balanceJob(t *testing.T, kind, pipe, dir, input string) string {
	t.Helper()
	extra := ""
	if kind == "merge_by_key" {
		extra = `key = ["trip_id"]
order_by = "updated_at"
[input.columns]
trip_id = "BIGINT"
rider_id = "BIGINT"
fare = "DOUBLE"
updated_at = "BIGINT"
`
	}
	return fmt.Sprintf(`name = "bal"
pipeline = %q
transform_version = 1
schema_version = 1
database = %q
[target]
table = "bal"
%s[input]
path = %q
`, pipe, filepath.Join(dir, "idem.duckdb"), extra, fixture(t, input))
}

func TestOutcomesTableMustBeASuffix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pipe := filepath.Join(dir, "p")
	copyPipeline(t, "versioned_changes", pipe)
	toml := filepath.Join(pipe, "pipeline.toml")
	data, err := os.ReadFile(toml)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(toml, []byte(replaceOnce(t, string(data), `outcomes_table = "_outcomes"`, `outcomes_table = "_out comes"`)), 0o644))
	_, err = run.LoadJob(writeJob(t, dir, balanceJob(t, "versioned_changes", pipe, dir, "fixtures/changes/batch-1.jsonl")), pipelines.FS)
	var jf *report.JobFileError
	require.ErrorAs(t, err, &jf)
	require.Equal(t, "outcomes_table", jf.Key)
	require.Contains(t, err.Error(), "pipeline.toml")
	require.Contains(t, err.Error(), "must be a table-name suffix")
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	require.Contains(t, s, old)
	return strings.Replace(s, old, new, 1)
}
