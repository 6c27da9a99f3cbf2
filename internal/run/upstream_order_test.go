package run_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/pipelines"
)

// TestUpstreamOrderOnlyWhereItMatters: a model whose result may depend on
// the order its upstream's rows arrive in (row_number() OVER ()) reads them
// in canonical order (ORDER BY ALL), whatever order the upstream's target
// stores them in; a model DuckDB's plan proves order-free, which reads the
// upstream without that sorted copy, gives the rows the same SQL gives over
// the upstream's table.
func TestUpstreamOrderOnlyWhereItMatters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	src := sampleJob(t, dir, "sample", fixture(t, "fixtures/sample/occurrences-a.csv"))
	// rev's canonical order (ORDER BY ALL: species_id, then id) is not
	// the order it stores its rows in.
	rev := writeModel(t, dir, "rev", "devil", "id", "SELECT species_id, id FROM {{upstream:devil}}")
	numbered := writeModel(t, dir, "numbered", "rev", "id", "SELECT id, row_number() OVER () AS rn FROM {{upstream:rev}}")
	counted := writeModel(t, dir, "counted", "rev", "species_id", "SELECT species_id, count(*) AS n, max(id) AS top FROM {{upstream:rev}} GROUP BY species_id")
	db := openDB(t, src.Database)
	for _, j := range []*job.Job{src, rev, numbered, counted} {
		res, err := db.Run(ctx, j, run.RunOptions{})
		require.NoError(t, err, j.Name)
		require.Equal(t, report.DecisionLoaded, res.Decision, j.Name)
	}
	stored, err := db.Query(ctx, "SELECT count(*) FROM (SELECT id, row_number() OVER () AS rn FROM rev) JOIN (SELECT id, row_number() OVER (ORDER BY species_id, id) AS want FROM rev) USING (id) WHERE rn <> want")
	require.NoError(t, err)
	require.NotEqual(t, [][]any{{int64(0)}}, stored.Values, "the test needs rev to store its rows in another order than the canonical one")

	wrong, err := db.Query(ctx, "SELECT count(*) FROM numbered JOIN (SELECT id, row_number() OVER (ORDER BY species_id, id) AS want FROM rev) USING (id) WHERE rn <> want")
	require.NoError(t, err)
	require.Equal(t, [][]any{{int64(0)}}, wrong.Values, "row_number() OVER () numbers the upstream's rows in canonical order")
	n, err := db.Query(ctx, "SELECT (SELECT count(*) FROM numbered), (SELECT count(*) FROM rev)")
	require.NoError(t, err)
	require.Equal(t, n.Values[0][1], n.Values[0][0])

	got, err := db.Query(ctx, "SELECT * FROM counted ORDER BY species_id")
	require.NoError(t, err)
	want, err := db.Query(ctx, "SELECT species_id, count(*) AS n, max(id) AS top FROM rev GROUP BY species_id ORDER BY species_id")
	require.NoError(t, err)
	require.NotEmpty(t, want.Values)
	require.Equal(t, want.Values, got.Values)
}

// writeModel writes model name (pipeline select, database idem.duckdb in
// dir) reading upstream, keyed by key, with sql in models/name.sql, and
// loads it.
func writeModel(t *testing.T, dir, name, upstream, key, sql string) *job.Job {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "models"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", name+".sql"), []byte(sql+"\n"), 0o644))
	path := filepath.Join(dir, name+".toml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`name = %q
pipeline = "select"
database = "idem.duckdb"
[input]
upstream = [%q]
[transform]
sql = "models/%s.sql"
[target]
key = [%q]
`, name, upstream, name, key)), 0o644))
	j, err := run.LoadJob(path, pipelines.FS)
	require.NoError(t, err)
	return j
}
