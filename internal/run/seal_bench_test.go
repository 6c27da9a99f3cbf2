package run

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
)

// BenchmarkSealCheck is the seal's per-run work around a job's steps (the
// identity of what the job does not own, before and after) in a database
// holding the tables of 2, 30 and 300 other jobs (a target of 1,000 rows,
// its outcomes companion and its history each): the cost must not grow
// with the jobs beside it (docs/benchmarks.md, "The seal's per-run cost").
func BenchmarkSealCheck(b *testing.B) {
	for _, jobs := range []int{2, 30, 300} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			ctx := context.Background()
			d, err := Open(ctx, b.TempDir()+"/idem.duckdb", OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1}})
			require.NoError(b, err)
			defer d.Close()
			for i := range jobs {
				for _, q := range []string{
					fmt.Sprintf("CREATE TABLE t%d AS SELECT range AS id, 'v' || range AS v FROM range(1000)", i),
					fmt.Sprintf("CREATE TABLE t%d_outcomes AS SELECT range AS id, 'accepted' AS outcome FROM range(1000)", i),
					fmt.Sprintf("CREATE TABLE idem.t%d__history AS SELECT range AS id, 1 AS s FROM range(1000)", i),
				} {
					_, err := d.SQL().ExecContext(ctx, q)
					require.NoError(b, err)
				}
			}
			j := &job.Job{Name: "m", Table: "m", Pipeline: &pipeline.Pipeline{Name: "custom"}}
			b.ResetTimer()
			for range b.N {
				tx, err := d.SQL().BeginTx(ctx, nil)
				require.NoError(b, err)
				s, err := newSealedRun(ctx, tx, j)
				require.NoError(b, err)
				require.NoError(b, s.verify(ctx, tx))
				require.NoError(b, tx.Rollback())
			}
			b.StopTimer() // closing checkpoints the database: not the seal's
		})
	}
}
