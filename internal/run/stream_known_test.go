package run_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
)

// askedReader gives its batches one per read and records the positions
// each read was asked from.
type askedReader struct {
	batches [][]source.Record
	asked   []map[string]int64
}

func (r *askedReader) Read(ctx context.Context, next map[string]int64, max int, maxWait time.Duration) ([]source.Record, []source.Gap, error) {
	i := len(r.asked)
	r.asked = append(r.asked, maps.Clone(next))
	if i < len(r.batches) {
		return r.batches[i], nil, nil
	}
	return nil, nil, nil
}

func (r *askedReader) Close() error { return nil }

// TestFollowerReadsFromWhatItCommitted: a follower's later batches are read
// from the positions its last batch committed, which it keeps rather than
// reading them again (source.Committed). Should they have moved all the
// same (nothing does while the follower holds the database; here its
// OnBatch moves them), the batch's transaction finds it and refuses the
// batch (exit 3), committing nothing, so no record applies twice.
func TestFollowerReadsFromWhatItCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("follows", func(t *testing.T) {
		t.Parallel()
		_, j, db := streamDB(t)
		r := &askedReader{batches: [][]source.Record{changes(0, 40), changes(40, 40), changes(80, 40)}}
		out, err := db.RunStream(ctx, j, run.RunOptions{}, run.StreamOptions{Reader: r, Follow: true, MaxBatches: 3})
		require.NoError(t, err)
		require.Len(t, out, 3)
		require.Equal(t, []map[string]int64{{}, {"0": 40}, {"0": 80}}, r.asked)
		require.Equal(t, map[string]int64{"0": 120}, out[2].Positions)
		rows, err := db.Query(ctx, `SELECT partition, next, snapshot FROM idem.positions`)
		require.NoError(t, err)
		require.Equal(t, "[[0 120 3]]", fmt.Sprint(rows.Values))
	})
	t.Run("moved", func(t *testing.T) {
		t.Parallel()
		_, j, db := streamDB(t)
		r := &askedReader{batches: [][]source.Record{changes(0, 40), changes(40, 40)}}
		move := func(*run.StreamResult) {
			_, err := db.SQL().ExecContext(ctx, `UPDATE idem.positions SET next = 35 WHERE job = 'rides' AND partition = '0'`)
			require.NoError(t, err)
		}
		out, err := db.RunStream(ctx, j, run.RunOptions{}, run.StreamOptions{Reader: r, Follow: true, MaxBatches: 2, OnBatch: move})
		require.Error(t, err)
		require.Equal(t, job.ExitRefused, job.ExitCode(err))
		require.Contains(t, err.Error(), "stream position of partition 0 moved from 40 to 35 since batch rides:0:40-79 was read; nothing committed")
		require.Len(t, out, 1)
		require.Equal(t, []map[string]int64{{}, {"0": 40}}, r.asked, "the second batch read from what the first committed")
		rows, err := db.Query(ctx, `SELECT (SELECT max(snapshot) FROM idem.snapshots WHERE job = 'rides'), (SELECT next FROM idem.positions WHERE job = 'rides'), (SELECT count(*) FROM rides_outcomes)`)
		require.NoError(t, err)
		require.Equal(t, "[[1 35 40]]", fmt.Sprint(rows.Values))
	})
}
