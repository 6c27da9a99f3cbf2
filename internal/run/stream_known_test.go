package run_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idem-dev/idem/internal/report"
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
		require.Equal(t, report.ExitRefused, report.ExitCode(err))
		require.Contains(t, err.Error(), "stream position of partition 0 moved from 40 to 35 since batch rides:0:40-79 was read; nothing committed")
		require.Len(t, out, 1)
		require.Equal(t, []map[string]int64{{}, {"0": 40}}, r.asked, "the second batch read from what the first committed")
		rows, err := db.Query(ctx, `SELECT (SELECT max(snapshot) FROM idem.snapshots WHERE job = 'rides'), (SELECT next FROM idem.positions WHERE job = 'rides'), (SELECT count(*) FROM rides_outcomes)`)
		require.NoError(t, err)
		require.Equal(t, "[[1 35 40]]", fmt.Sprint(rows.Values))
	})
}

// TestFollowerReadsAhead: a follower of a Kafka topic reads its next batch
// while the one before it is applied (its ListOffsets are seen before the
// first batch's OnBatch returns), and every record is still applied once.
// A batch read ahead whose positions moved before it committed is refused
// with nothing committed, and its file does not stay in the store.
func TestFollowerReadsAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, moved := range []bool{false, true} {
		t.Run(fmt.Sprint("moved=", moved), func(t *testing.T) {
			t.Parallel()
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "rides"))
			require.NoError(t, err)
			t.Cleanup(c.Close)
			var lists atomic.Int64
			c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				lists.Add(1)
				return nil, nil, false
			})
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()[0]), kgo.ProducerLinger(0))
			require.NoError(t, err)
			defer cl.Close()
			var recs []*kgo.Record
			for _, r := range changes(0, 120) {
				recs = append(recs, &kgo.Record{Topic: "rides", Value: r.Value})
			}
			require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
			path, j, db := streamDB(t)
			j.Input.Stream.Brokers, j.Input.Stream.MaxRecords = c.ListenAddrs(), 40
			r, err := source.NewKafkaReader(j.Input.Stream)
			require.NoError(t, err)
			defer r.Close()
			onBatch := func(sr *run.StreamResult) {
				if sr.Snapshot != 1 {
					return
				}
				// A Read lists the offsets twice: the second has begun.
				require.Eventually(t, func() bool { return lists.Load() >= 4 }, 10*time.Second, time.Millisecond, "the next batch read while the first was applied")
				if moved {
					_, err := db.SQL().ExecContext(ctx, `UPDATE idem.positions SET next = 35 WHERE job = 'rides'`)
					require.NoError(t, err)
				}
			}
			out, err := db.RunStream(ctx, j, run.RunOptions{}, run.StreamOptions{Reader: r, Follow: true, MaxBatches: 3, OnBatch: onBatch})
			q := `SELECT (SELECT max(snapshot) FROM idem.snapshots WHERE job = 'rides'), (SELECT next FROM idem.positions WHERE job = 'rides'), (SELECT count(*) FROM rides_outcomes), (SELECT count(DISTINCT change_id) FROM rides_outcomes)`
			if moved {
				require.Error(t, err)
				require.Equal(t, report.ExitRefused, report.ExitCode(err))
				require.Contains(t, err.Error(), "stream position of partition 0 moved from 40 to 35 since batch rides:0:40-79 was read; nothing committed")
				require.Len(t, out, 1)
				rows, err := db.Query(ctx, q)
				require.NoError(t, err)
				require.Equal(t, "[[1 35 40 40]]", fmt.Sprint(rows.Values))
			} else {
				require.NoError(t, err)
				require.Len(t, out, 3)
				rows, err := db.Query(ctx, q)
				require.NoError(t, err)
				require.Equal(t, "[[3 120 120 120]]", fmt.Sprint(rows.Values))
			}
			left, err := filepath.Glob(filepath.Join(source.StreamDir(path), "*stream-*"))
			require.NoError(t, err)
			require.Empty(t, left, "no batch file left in the store")
		})
	}
}
