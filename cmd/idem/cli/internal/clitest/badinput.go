package clitest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/run"
)

// ExecSQL runs statement q on the database at dbPath through idem's own
// open (the catalog migrated), as a user or another tool would.
func ExecSQL(t *testing.T, dbPath, q string) {
	t.Helper()
	db, err := run.Open(context.Background(), dbPath, run.OpenOptions{})
	require.NoError(t, err)
	defer db.Close()
	_, err = db.SQL().ExecContext(context.Background(), q)
	require.NoError(t, err)
}
