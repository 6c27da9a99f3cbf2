package run

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"

	"github.com/stretchr/testify/require"
)

// DuckDB's percentage of a running statement reaches a step's Percent hook:
// it rises while a long scan runs, stays within 0-100, and stops with the
// step. It fails if duckdb-go stops holding the handle rawConnection reads.
func TestQueryProgressIsReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "p.duckdb"), OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1}})
	require.NoError(t, err)
	defer d.Close()
	conn, err := d.sql.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	// A million rows: the scan below takes about a second of one thread,
	// several polls (job.PercentPoll) on any machine; three million took
	// 3 CPU-seconds of CI for no further reading.
	_, err = conn.ExecContext(ctx, `CREATE TEMP TABLE big AS SELECT i, md5(i::VARCHAR) AS s FROM range(1000000) t(i)`)
	require.NoError(t, err)

	var mu sync.Mutex
	var seen []float64
	p := withQueryProgress(ctx, report.Progress{
		Step: func(string) func(time.Duration) { return nil },
		Percent: func(pct float64) {
			mu.Lock()
			seen = append(seen, pct)
			mu.Unlock()
		},
	}, conn)
	require.True(t, p.Queries(), "no DuckDB connection handle: query progress is unavailable")

	done := p.Start("scan")
	start := time.Now()
	_, err = conn.ExecContext(ctx, `CREATE TEMP TABLE agg AS SELECT md5(md5(md5(s))) AS a, md5(md5(s || 'x')) AS b FROM big`)
	require.NoError(t, err)
	took := time.Since(start)
	done()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("statement took %v; percentages %v", took, seen)
	require.NotEmpty(t, seen, "no percentage reported during a %v statement", took)
	for i, pct := range seen {
		require.True(t, pct >= 0 && pct <= 100, "percentage %v out of range", pct)
		if i > 0 {
			require.Greater(t, pct, seen[i-1], "reported only when it changes, and it only rises within one statement")
		}
	}
	n := len(seen)
	time.Sleep(3 * report.PercentPoll)
	require.Len(t, seen, n, "nothing is reported after the step ended")
}
