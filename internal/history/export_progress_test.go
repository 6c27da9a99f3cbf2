package history_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"
)

// An export shows as one step, "export", and reports the bytes written
// under the output's name, rising to the file's size, all before the step
// ends; a partitioned export reports each file.
func TestExportReportsProgress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	j := sampleJob(t, dir, "sample", fixture(t, "fixtures/sample/occurrences-a.csv"))
	db := openDB(t, j.Database)
	_, err := db.Run(ctx, j, run.RunOptions{})
	require.NoError(t, err)

	for _, tc := range []struct {
		name, partition string
	}{{"one file", ""}, {"partitioned", "species_id"}} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var steps []string
			last := map[string]int64{}
			ended := false
			var problems []string
			p := report.Progress{
				Step: func(name string) func(time.Duration) {
					mu.Lock()
					steps = append(steps, name)
					mu.Unlock()
					return func(time.Duration) {
						mu.Lock()
						ended = true
						mu.Unlock()
					}
				},
				// Called from idem's hashing goroutine: record, check later.
				Bytes: func(label string, done, total int64) {
					mu.Lock()
					defer mu.Unlock()
					switch {
					case ended:
						problems = append(problems, "bytes reported after the step ended")
					case total != -1:
						problems = append(problems, "an export's size is not known in advance")
					case done < last[label]:
						problems = append(problems, "bytes done fell for "+label)
					}
					last[label] = done
				},
			}
			out := filepath.Join(t.TempDir(), "out.csv")
			if tc.partition != "" {
				out = filepath.Join(t.TempDir(), "parts")
			}
			res, err := export.Export(ctx, db, j, export.Options{Out: out, PartitionBy: tc.partition, Progress: p})
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			require.Empty(t, problems)
			require.Equal(t, []string{"export"}, steps)
			require.True(t, ended)
			if tc.partition == "" {
				st, err := os.Stat(out)
				require.NoError(t, err)
				require.Equal(t, map[string]int64{"out.csv": st.Size()}, last)
				return
			}
			require.Len(t, last, len(res.Files), "each partition file is reported under its own path")
			for _, f := range res.Files {
				require.Equal(t, f.Bytes, last[f.Path], f.Path)
			}
		})
	}
}
