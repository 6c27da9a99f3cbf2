package run

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

// TestGuardCacheCannotPassBadSQL: a verdict kept in the guard cache is
// found only by the same content; SQL that differs, a job that may scan
// other tables, or a table that appears in the database after the verdict
// was kept is refused as without a cache.
func TestGuardCacheCannotPassBadSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTestDB(t, t.TempDir())
	for _, q := range []string{
		"CREATE TABLE sec (k VARCHAR, v VARCHAR)",
		"CREATE TABLE m (k VARCHAR)",
		"CREATE TABLE n (k VARCHAR)",
	} {
		_, err := d.SQL().ExecContext(ctx, q)
		require.NoError(t, err)
	}
	c := newGuardCache()
	model := func(name, sql string) *job.Job {
		return &job.Job{Name: name, Table: name, Pipeline: &pipeline.Pipeline{Name: "custom"},
			Steps: []pipeline.Step{{Name: "01_model.sql", SQL: sql + ";\n"}}}
	}

	t.Run("seal", func(t *testing.T) {
		ok := model("m", "CREATE OR REPLACE TEMP TABLE idem_x AS SELECT 1 AS k FROM later")
		for range 2 { // a miss, then a hit
			vs, err := sealViolations(ctx, d.SQL(), ok, c)
			require.NoError(t, err)
			require.Empty(t, vs)
		}
		bad := model("m", "CREATE OR REPLACE TEMP TABLE idem_x AS SELECT k FROM sec")
		vs, err := sealViolations(ctx, d.SQL(), bad, c)
		require.NoError(t, err)
		require.Len(t, vs, 1)
		require.Equal(t, "sec", vs[0].Construct)
		// The name left to the database is looked up on a hit too: a
		// table named later that appears since is another job's.
		_, err = d.SQL().ExecContext(ctx, "CREATE TABLE later (k INT)")
		require.NoError(t, err)
		vs, err = sealViolations(ctx, d.SQL(), ok, c)
		require.NoError(t, err)
		require.Len(t, vs, 1)
		require.Equal(t, "later", vs[0].Construct)
	})

	t.Run("explain", func(t *testing.T) {
		step := pipeline.Step{Name: "01.sql", SQL: "INSERT INTO m SELECT k FROM n"}
		exec := func(j *job.Job, scans ...string) error {
			tx, err := d.SQL().BeginTx(ctx, nil)
			require.NoError(t, err)
			defer tx.Rollback()
			s, err := newSealedRun(ctx, tx, j)
			require.NoError(t, err)
			s.cache = c
			for _, n := range scans {
				s.scans[storeCatalog+".main."+n] = true
			}
			return s.exec(ctx, tx, step)
		}
		j := &job.Job{Name: "m", Table: "m", Pipeline: &pipeline.Pipeline{Name: "custom"}}
		require.NoError(t, exec(j, "n")) // as if n were an upstream's target
		require.NoError(t, exec(j, "n"))
		// The same statement in a run that may not scan n.
		err := exec(j)
		require.ErrorIs(t, err, report.ErrUsage)
		require.ErrorContains(t, err, "reads table idem_store.main.n")
	})
}
