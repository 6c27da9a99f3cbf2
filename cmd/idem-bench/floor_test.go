package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWithoutHistory: the no-history floor is the apply floor minus every
// statement that touches history, and nothing else.
func TestWithoutHistory(t *testing.T) {
	t.Parallel()
	require.Contains(t, floorApplySQL, "__history", "the apply floor writes history")
	got, err := withoutHistory(floorApplySQL)
	require.NoError(t, err)
	require.NotContains(t, got, "__history")
	for _, kept := range []string{"MERGE INTO changes", "INSERT INTO changes_outcomes", "INSERT INTO idem.ledger", "INSERT INTO idem.snapshots", "UPDATE idem.jobs", "INSERT INTO idem.runs"} {
		require.Contains(t, got, kept)
	}
	_, err = withoutHistory("SELECT 1;\n-- Bookkeeping rows.\nSELECT 2;\n")
	require.ErrorContains(t, err, "no \"-- History:\"")
}
