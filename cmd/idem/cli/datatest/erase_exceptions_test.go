package datatest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// Erasure without exceptions (issue 43): each test is an attack that held
// on d4c1a70's code.

// copyLanding copies the landing file name of a job folder under a new
// name, as an old file fed again.
func copyLanding(t *testing.T, dir, name, as string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "landing", name))
	require.NoError(t, err)
	clitest.WriteFile(t, filepath.Join(dir, "landing", as), string(data))
}

// TestEraseReplayMergeByKey: a merge_by_key job fed by files has no
// position column; an old landing file copied under a new name after an
// erasure, by subject or by key, brings nothing of the erased rows back:
// they get outcome erased with no value kept (not even the key), the
// retained copy of the new file is rewritten without them, and every
// snapshot reruns.
func TestEraseReplayMergeByKey(t *testing.T) {
	t.Parallel()
	jobFile, db := tripsSubjectJob(t)
	dir := filepath.Dir(jobFile)
	code, out, errOut := clitest.InProcess(t, "run", jobFile)
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "erase", jobFile, "--subject", "r100")
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "erase", jobFile, "--key", "4")
	require.Equal(t, 0, code, out+errOut)

	copyLanding(t, dir, "1.jsonl", "1-again.jsonl")
	copyLanding(t, dir, "2.jsonl", "2-again.jsonl")
	code, out, errOut = clitest.InProcess(t, "run", jobFile)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "outcomes  duplicate 1, erased 1\n")
	require.Contains(t, out, "outcomes  erased 3\n")
	require.Equal(t, []string{"2|r101"}, clitest.QueryStrs(t, db, `SELECT trip_id || '|' || rider_id FROM trips ORDER BY ALL`))
	require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM idem.trips__history WHERE rider_id = 'r100' OR trip_id IN (1, 3, 4)`))
	// The erased rows' outcomes hold no value at all.
	require.Equal(t, []string{"4"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM trips_outcomes WHERE outcome = 'erased' AND coalesce(trip_id, rider_id, fare, updated_at) IS NULL`))
	require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM trips_outcomes WHERE rider_id IN ('r100', 'r102') OR trip_id IN ('1', '3', '4')`))
	clitest.RequireNoPayload(t, db+".inputs", "r100", "")
	clitest.RequireNoPayload(t, db+".inputs", "r102", "")
	snaps := clitest.QueryStrs(t, db, `SELECT snapshot FROM idem.snapshots WHERE job = 'trips' ORDER BY snapshot`)
	require.Len(t, snaps, 6)
	for _, s := range snaps {
		code, out, errOut = clitest.InProcess(t, "rerun", jobFile, "--snapshot", s, "--json")
		require.Equal(t, 0, code, "snapshot %s: %s", s, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %s", s)
	}
	// The key erased is refused for good: a job without a position column
	// cannot tell an old row of it from a new one.
	clitest.WriteFile(t, filepath.Join(dir, "landing", "3.jsonl"), `{"trip_id": 4, "rider_id": "r103", "fare": 1.0, "updated_at": 9}`+"\n")
	code, out, errOut = clitest.InProcess(t, "run", jobFile)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "outcomes  erased 1\n")
}
