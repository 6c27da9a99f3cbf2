package history

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/source"
)

// TestBatchRanges: the batch id of an apply run over upstream changes
// names each upstream's range of snapshots; anything else is an error.
func TestBatchRanges(t *testing.T) {
	t.Parallel()
	got, err := batchRanges("upstream:a:0-3,b_2:2-4")
	require.NoError(t, err)
	require.Equal(t, map[string]source.Range{"a": {Job: "a", From: 0, To: 3}, "b_2": {Job: "b_2", From: 2, To: 4}}, got)
	for _, bad := range []string{"", "b1.jsonl", "upstream:", "upstream:a", "upstream:a:1", "upstream::1-2", "upstream:a:x-2"} {
		_, err := batchRanges(bad)
		require.Error(t, err, "%q", bad)
	}
}
