package clitest

import (
	"context"

	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"
)

// Create makes the job's database with idem's tables and nothing else, so a
// refused first run can be compared with the state before it.
func (j *GuardJob) Create() {
	j.t.Helper()
	db, err := run.Open(context.Background(), j.DB, run.OpenOptions{})
	require.NoError(j.t, err)
	require.NoError(j.t, db.Close())
}
