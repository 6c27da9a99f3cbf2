package datatest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/stretchr/testify/require"
)

// packetJob is a merge_by_key job without partition_by whose rows name a
// subject (rider_id), fed three files: snapshots 1, 2 and 3, each holding
// rows of r100.
func packetJob(t *testing.T) (job, db string) {
	t.Helper()
	job, db = tripsSubjectJob(t)
	dir := filepath.Dir(job)
	clitest.WriteFile(t, filepath.Join(dir, "landing", "3.jsonl"), `{"trip_id": 2, "rider_id": "r101", "fare": 8.5, "updated_at": 2}
{"trip_id": 5, "rider_id": "r103", "fare": 30.0, "updated_at": 1}
`)
	code, out, errOut := clitest.InProcess(t, "run", job)
	require.Equal(t, 0, code, out+errOut)
	require.Equal(t, []string{"3"}, clitest.QueryStrs(t, db, `SELECT max(snapshot) FROM idem.snapshots WHERE job = 'trips'`))
	return job, db
}

// exportCSV is `idem export JOB --snapshot S --format csv` and its file.
func exportCSV(t *testing.T, job string, s int64) (*export.Result, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "snapshot.csv")
	code, stdout, stderr := clitest.InProcess(t, "export", job, "--snapshot", strconv.FormatInt(s, 10), "--format", "csv", "--out", out, "--json")
	require.Equal(t, 0, code, stdout+stderr)
	var res export.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), stdout)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	return &res, string(data)
}

// showPacket is `idem show JOB --snapshot S --json`, and its human output.
func showPacket(t *testing.T, job string, s int64) (*inspect.Shown, string) {
	t.Helper()
	code, stdout, stderr := clitest.InProcess(t, "show", job, "--snapshot", strconv.FormatInt(s, 10), "--json")
	require.Equal(t, 0, code, stdout+stderr)
	var p inspect.Shown
	require.NoError(t, json.Unmarshal([]byte(stdout), &p), stdout)
	code, human, stderr := clitest.InProcess(t, "show", job, "--snapshot", strconv.FormatInt(s, 10))
	require.Equal(t, 0, code, human+stderr)
	return &p, human
}

// storedEntries are the entries of snapshot s's packet as committed in
// idem.packets, not as show computes them.
func storedEntries(t *testing.T, db string, s int64) catalog.Packet {
	t.Helper()
	texts := clitest.QueryStrs(t, db, `SELECT packet FROM idem.packets WHERE job = 'trips' AND snapshot = ?`, s)
	require.Len(t, texts, 1)
	var p catalog.Packet
	require.NoError(t, json.Unmarshal([]byte(texts[0]), &p))
	return p
}

// The packet of a job without partition_by commits the whole target's row
// count and bounds, not its distinct keys (a hash of every key) nor its
// sha256 (a full export per commit); idem show computes them from the
// snapshot's rows, the sha256 and bytes equal to those
// of `idem export JOB --snapshot S --format csv`, for an old snapshot
// after newer commits too and after an erasure of a subject, when they are
// those of the rows without the subject. An erasure leaves a pending
// entry pending, and resets one an older idem stored.
func TestPacketWholeTargetShownWhenAsked(t *testing.T) {
	t.Parallel()
	job, db := packetJob(t)
	before := map[int64]string{}
	for s := int64(1); s <= 3; s++ {
		stored := storedEntries(t, db, s)
		require.Len(t, stored.Entries, 1)
		require.True(t, stored.Entries[0].Whole)
		require.True(t, stored.Entries[0].Pending(), "snapshot %d: the run commits no sha256 of the whole target", s)
		require.Zero(t, stored.Entries[0].Bytes)
		require.Zero(t, stored.Entries[0].DistinctKeys, "distinct keys are computed when asked too")

		exp, data := exportCSV(t, job, s)
		p, human := showPacket(t, job, s)
		require.Len(t, p.Entries, 1)
		e := p.Entries[0]
		require.Equal(t, exp.SHA256, e.SHA256, "snapshot %d", s)
		require.Equal(t, exp.Bytes, e.Bytes, "snapshot %d", s)
		require.Equal(t, int64(len(data)), e.Bytes)
		require.Equal(t, exp.Rows, e.Rows)
		require.Equal(t, stored.Entries[0].Rows, e.Rows)
		require.Equal(t, exp.Rows, e.DistinctKeys, "one row per trip_id")
		require.Equal(t, stored.Entries[0].Bounds, e.Bounds)
		require.Contains(t, human, fmt.Sprintf("  whole target: %d rows, %d distinct keys, %d bytes, sha256 %s\n", e.Rows, e.DistinctKeys, e.Bytes, exp.SHA256))
		require.Contains(t, data, "r100", "snapshot %d holds the subject", s)
		before[s] = exp.SHA256
	}
	require.Len(t, map[string]bool{before[1]: true, before[2]: true, before[3]: true}, 3)

	// An older idem stored snapshot 1's sha256 when it committed: show
	// prints it as stored.
	p1 := storedEntries(t, db, 1)
	p1.Entries[0].SHA256, p1.Entries[0].Bytes = before[1], 12345
	data, err := json.Marshal(&p1)
	require.NoError(t, err)
	clitest.ExecSQL(t, db, `UPDATE idem.snapshots SET packet = '`+strings.ReplaceAll(string(data), "'", "''")+`' WHERE job = 'trips' AND snapshot = 1`)
	p, _ := showPacket(t, job, 1)
	require.Equal(t, int64(12345), p.Entries[0].Bytes, "a stored sha256 is not computed again")

	code, out, errOut := clitest.InProcess(t, "erase", job, "--subject", "r100", "--json")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, `"packets_rewritten":[1,2,3]`)
	raw := strings.Join(clitest.QueryStrs(t, db, `SELECT packet FROM idem.packets ORDER BY snapshot`), "\n")
	require.NotContains(t, raw, "r100")
	for s := int64(1); s <= 3; s++ {
		stored := storedEntries(t, db, s)
		require.True(t, stored.Entries[0].Pending(), "snapshot %d: after the erasure the entry is pending, its sha256 computed from the rows without the subject", s)
		require.Len(t, stored.Erasures, 1)
		if s == 1 {
			require.Equal(t, before[1], stored.Erasures[0].Replaced[0].SHA256, "the sha256 an older idem stored is the one replaced")
		} else {
			require.True(t, stored.Erasures[0].Replaced[0].Pending())
		}
	}
	for s := int64(1); s <= 4; s++ {
		exp, data := exportCSV(t, job, s)
		require.NotContains(t, data, "r100")
		p, human := showPacket(t, job, s)
		e := p.Entries[0]
		require.Equal(t, exp.SHA256, e.SHA256, "snapshot %d after the erasure", s)
		require.Equal(t, exp.Bytes, e.Bytes, "snapshot %d after the erasure", s)
		require.Equal(t, exp.Rows, e.Rows)
		require.Equal(t, exp.Rows, e.DistinctKeys)
		for b := int64(1); b <= 3; b++ {
			require.NotEqual(t, before[b], e.SHA256, "snapshot %d shows the sha256 of rows holding the erased subject", s)
		}
		if s == 4 {
			require.Contains(t, human, "snapshot 4 is an erasure and writes no packet; it holds the rows of snapshot 3")
			continue
		}
		want := "  erased    by snapshot 4: whole target was "
		if s == 1 {
			want += "2 rows, sha256 " + before[1] + "\n"
		} else {
			want += fmt.Sprintf("%d rows, sha256 not computed before the erasure\n", p.Erasures[0].Replaced[0].Rows)
		}
		require.Contains(t, human, want, "snapshot %d", s)
	}
}
