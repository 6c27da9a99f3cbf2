package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProjectModelsInOrder: the floor builds each model after every job it
// reads, and every job a model reads is in the project.
func TestProjectModelsInOrder(t *testing.T) {
	t.Parallel()
	built := map[string]bool{}
	for _, s := range projSources {
		built[s.name] = true
	}
	for _, m := range projModelList {
		_, ups, err := modelSQL(m.name)
		require.NoError(t, err)
		require.NotEmpty(t, ups, m.name)
		for _, u := range ups {
			require.True(t, built[u], "%s reads %s before it is built", m.name, u)
		}
		built[m.name] = true
	}
}

// TestProjectMonthSameBytes: a month's files depend on the month and the
// size alone, so idem and the floor read the same data on every machine.
func TestProjectMonthSameBytes(t *testing.T) {
	t.Parallel()
	g := projGen{ordersPerMonth: 50}
	a, b := t.TempDir(), t.TempDir()
	require.NoError(t, g.writeMonth(a, 3))
	require.NoError(t, writeReference(a))
	require.NoError(t, g.writeMonth(b, 3))
	require.NoError(t, writeReference(b))
	for _, f := range []string{"raw/customers/2025-03.csv", "raw/orders/2025-03.csv", "raw/items/2025-03.csv", "raw/products.csv", "raw/supplies.csv", "raw/stores.csv"} {
		x, err := os.ReadFile(filepath.Join(a, f))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b, f))
		require.NoError(t, err)
		require.Equal(t, x, y, f)
	}
	orders, err := os.ReadFile(filepath.Join(a, "raw/orders/2025-03.csv"))
	require.NoError(t, err)
	require.Contains(t, string(orders), ",returned,", "last month's returns come back")
}
