package projectrun

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/project"
)

func mk(db, name string, up ...string) *job.Job {
	j := &job.Job{Name: name, Database: db, File: name + ".toml"}
	j.Input.Upstream = up
	return j
}

// TestRunBlocksDownstream: a job that fails blocks every job downstream of
// it, directly or not, and nothing else; each job is given the decisions of
// its upstreams; outcomes come back in run order.
func TestRunBlocksDownstream(t *testing.T) {
	t.Parallel()
	p, err := project.New([]*job.Job{
		mk("a.duckdb", "daily", "clean"),
		mk("a.duckdb", "weekly", "daily"),
		mk("a.duckdb", "clean", "trips", "zones"),
		mk("a.duckdb", "trips"),
		mk("a.duckdb", "zones"),
		mk("b.duckdb", "other"),
	})
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[string]map[string]string{}
	var blocked []string
	out := Run(context.Background(), p, 2, func(_ context.Context, j *job.Job, up map[string]string) (string, error) {
		mu.Lock()
		seen[j.Name] = up
		mu.Unlock()
		if j.Name == "daily" {
			return "", errors.New("boom")
		}
		return "applied", nil
	}, func(j *job.Job, by []string) {
		mu.Lock()
		blocked = append(blocked, j.Name)
		mu.Unlock()
	})
	var order []string
	for _, o := range out {
		order = append(order, o.Job.Name)
	}
	require.Equal(t, []string{"trips", "zones", "clean", "daily", "weekly", "other"}, order)
	require.Equal(t, map[string]string{"trips": "applied", "zones": "applied"}, seen["clean"])
	require.EqualError(t, out[3].Err, "boom")
	require.Equal(t, []string{"daily"}, out[4].BlockedBy)
	require.Equal(t, []string{"weekly"}, blocked)
	require.NotContains(t, seen, "weekly")
	require.Equal(t, "applied", out[5].Decision)
	require.NoError(t, out[5].Err)
}

// TestRunGroupsAtOnce: groups of different database files run at once up
// to the limit, the jobs of one file one after another.
func TestRunGroupsAtOnce(t *testing.T) {
	t.Parallel()
	p, err := project.New([]*job.Job{mk("a.duckdb", "a1"), mk("a.duckdb", "a2"), mk("b.duckdb", "b1"), mk("c.duckdb", "c1")})
	require.NoError(t, err)
	for _, limit := range []int{1, 2, 3} {
		var running, peak atomic.Int32
		perDB := map[string]*atomic.Int32{"a.duckdb": {}, "b.duckdb": {}, "c.duckdb": {}}
		Run(context.Background(), p, limit, func(_ context.Context, j *job.Job, _ map[string]string) (string, error) {
			n := running.Add(1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			assert.Equal(t, int32(1), perDB[j.Database].Add(1), "two jobs of %s at once", j.Database) // not require: another goroutine
			time.Sleep(20 * time.Millisecond)
			perDB[j.Database].Add(-1)
			running.Add(-1)
			return "loaded", nil
		}, nil)
		require.LessOrEqual(t, peak.Load(), int32(limit))
		if limit > 1 {
			require.Greater(t, peak.Load(), int32(1), "limit %d ran one group at a time", limit)
		}
	}
}
