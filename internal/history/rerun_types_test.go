package history_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/pipelines"
)

// TestRerunModelOverModelKeepsTypes: a model over a model whose column is
// a HUGEINT (a sum of BIGINT) reruns: the replay reads the upstream's rows
// with the types the run read (Parquet, which carries the rows to the
// scratch database, has no HUGEINT and would make it a DOUBLE, changing
// the downstream's result type and so its job key), and exactly, beyond
// 2^53.
func TestRerunModelOverModelKeepsTypes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	write("changes.jsonl", `{"change_id":"1","entity_id":"a","source_version":9007199254740993,"operation":"upsert","value":"x"}
{"change_id":"2","entity_id":"b","source_version":9007199254740995,"operation":"upsert","value":"y"}
`)
	const duck = "[duckdb]\nthreads = 1\n"
	files := []string{
		write("vc.toml", "name = \"vc\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\ndatabase = \"chain.duckdb\"\n[input]\npath = \"changes.jsonl\"\n"+duck),
		write("m1.toml", "name = \"m1\"\npipeline = \"select\"\ntransform_version = 1\ndatabase = \"chain.duckdb\"\n[input]\nupstream = [\"vc\"]\n[transform]\nsql = \"models/m1\"\n[target]\nkey = [\"entity_id\"]\n"+duck),
		write("m2.toml", "name = \"m2\"\npipeline = \"select\"\ntransform_version = 1\ndatabase = \"chain.duckdb\"\n[input]\nupstream = [\"m1\"]\n[transform]\nsql = \"models/m2\"\n[target]\nkey = [\"k\"]\n"+duck),
	}
	write("models/m1/v1.sql", "SELECT entity_id, sum(source_version) * 1000003 AS s FROM {{upstream:vc}} GROUP BY entity_id\n")
	write("models/m2/v1.sql", "SELECT 'all' AS k, sum(s) AS total, count(*) AS n FROM {{upstream:m1}}\n")

	ctx := context.Background()
	jobs := make([]*job.Job, len(files))
	for i, f := range files {
		var err error
		jobs[i], err = run.LoadJob(f, pipelines.FS)
		require.NoError(t, err)
	}
	d, err := run.Open(ctx, filepath.Join(dir, "chain.duckdb"), run.OpenOptions{DuckDB: jobs[0].DuckDB})
	require.NoError(t, err)
	for _, j := range jobs {
		res, err := d.Run(ctx, j, run.RunOptions{})
		require.NoError(t, err, j.Name)
		require.Contains(t, []string{report.DecisionApplied, report.DecisionLoaded}, res.Decision, j.Name)
	}
	var typ, total string
	require.NoError(t, d.SQL().QueryRowContext(ctx, `SELECT typeof(total), CAST(total AS VARCHAR) FROM m2`).Scan(&typ, &total))
	require.Equal(t, "HUGEINT", typ)
	require.Equal(t, "18014452552677516445964", total, "(2^53+1 + 2^53+3) × 1000003, exactly")
	for _, j := range jobs[1:] {
		res, err := history.Rerun(ctx, d, j, history.RerunOptions{DuckDB: j.DuckDB})
		require.NoError(t, err, j.Name)
		require.True(t, res.Reproduced, "%s: %+v", j.Name, res.Diff)
	}
	require.NoError(t, d.Close())
}
