package history

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
)

// TestUpstreamRead: the oldest snapshot of an upstream that the replay of
// one snapshot row reads. A batch of changes reads its range's start (when
// above 0) and its pinned end, the lower of the two after the upstream was
// rolled back below what the job applied; a model or refresh load the
// snapshot it pinned; an erasure, a rollback, a batch of files and a run
// over another upstream read nothing of it.
func TestUpstreamRead(t *testing.T) {
	t.Parallel()
	// parts is key parts pinning each (job, snapshot) pair of pins.
	parts := func(pins ...any) string {
		refs := []string{}
		for i := 0; i+1 < len(pins); i += 2 {
			refs = append(refs, fmt.Sprintf(`{"job":%q,"job_key":"k","snapshot":%d}`, pins[i], pins[i+1]))
		}
		return `{"upstream":[` + strings.Join(refs, ",") + `]}`
	}
	for _, tc := range []struct {
		name, mode string
		row        catalog.SnapshotRow
		want       int64
	}{
		{"first batch of changes", pipeline.ModeApply, catalog.SnapshotRow{Kind: "applied", BatchID: "upstream:up:0-3", PartsJSON: parts("up", 3)}, 3},
		{"batch of changes", pipeline.ModeApply, catalog.SnapshotRow{Kind: "applied", BatchID: "upstream:up:2-5", PartsJSON: parts("up", 5)}, 2},
		{"realigned after a rollback upstream", pipeline.ModeApply, catalog.SnapshotRow{Kind: "applied", BatchID: "upstream:up:5-3", PartsJSON: parts("up", 3)}, 3},
		{"two upstreams", pipeline.ModeApply, catalog.SnapshotRow{Kind: "applied", BatchID: "upstream:other:1-9,up:4-6", PartsJSON: parts("other", 9, "up", 6)}, 4},
		{"model load", pipeline.ModeRefresh, catalog.SnapshotRow{Kind: "loaded", PartsJSON: parts("up", 7)}, 7},
		{"other upstream", pipeline.ModeRefresh, catalog.SnapshotRow{Kind: "loaded", PartsJSON: parts("other", 7)}, 0},
		{"erasure", pipeline.ModeApply, catalog.SnapshotRow{Kind: report.KindErase, PartsJSON: parts("up", 5)}, 0},
		{"rollback", pipeline.ModeApply, catalog.SnapshotRow{Kind: report.KindRollback, PartsJSON: parts("up", 5)}, 0},
		{"batch of files", pipeline.ModeApply, catalog.SnapshotRow{Kind: "applied", BatchID: "b1.jsonl", PartsJSON: parts()}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := upstreamRead("up", tc.mode, &tc.row)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
