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

// TestRunBranchesAtOnce: jobs whose upstreams are done run at once up to
// the limit, of one database file or several, never a job before its
// upstreams; two jobs of one file naming one target run in order.
func TestRunBranchesAtOnce(t *testing.T) {
	t.Parallel()
	same := mk("a.duckdb", "a4")
	same.Table = "a1"
	first := mk("a.duckdb", "a1")
	first.Table = "a1"
	p, err := project.New([]*job.Job{first, mk("a.duckdb", "a2"), mk("a.duckdb", "a3", "a1", "a2"), same, mk("b.duckdb", "b1")})
	require.NoError(t, err)
	for _, limit := range []int{1, 2, 3} {
		var running, peak atomic.Int32
		var mu sync.Mutex
		done := map[string]bool{}
		var order []string
		Run(context.Background(), p, limit, func(_ context.Context, j *job.Job, _ map[string]string) (string, error) {
			mu.Lock()
			for _, u := range j.Input.Upstream {
				assert.True(t, done[u], "%s ran before its upstream %s", j.Name, u) // not require: another goroutine
			}
			if j.Name == "a4" {
				assert.True(t, done["a1"], "a4 ran before a1, which names the same target")
			}
			order = append(order, j.Name)
			mu.Unlock()
			n := running.Add(1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			running.Add(-1)
			mu.Lock()
			done[j.Name] = true
			mu.Unlock()
			return "loaded", nil
		}, nil)
		require.LessOrEqual(t, peak.Load(), int32(limit))
		if limit == 1 {
			var want []string
			for _, j := range p.Jobs {
				want = append(want, j.Name)
			}
			require.Equal(t, want, order)
		} else {
			require.Greater(t, peak.Load(), int32(1), "limit %d ran one job at a time", limit)
		}
	}
}

// TestRunDiamondFailingBranch: in a diamond (top, two branches, bottom) and
// a second chain, a failing branch blocks the bottom and nothing else,
// whatever the limit.
func TestRunDiamondFailingBranch(t *testing.T) {
	t.Parallel()
	p, err := project.New([]*job.Job{
		mk("a.duckdb", "top"), mk("a.duckdb", "left", "top"), mk("a.duckdb", "right", "top"),
		mk("a.duckdb", "bottom", "left", "right"), mk("a.duckdb", "solo"), mk("a.duckdb", "solo2", "solo"),
	})
	require.NoError(t, err)
	for _, limit := range []int{1, 4} {
		out := Run(context.Background(), p, limit, func(_ context.Context, j *job.Job, _ map[string]string) (string, error) {
			if j.Name == "left" {
				return "", errors.New("boom")
			}
			return "loaded", nil
		}, nil)
		got := map[string]string{}
		for _, o := range out {
			switch {
			case len(o.BlockedBy) > 0:
				got[o.Job.Name] = "blocked by " + o.BlockedBy[0]
			case o.Err != nil:
				got[o.Job.Name] = o.Err.Error()
			default:
				got[o.Job.Name] = o.Decision
			}
		}
		require.Equal(t, map[string]string{"top": "loaded", "left": "boom", "right": "loaded", "bottom": "blocked by left",
			"solo": "loaded", "solo2": "loaded"}, got, "limit %d", limit)
	}
}
