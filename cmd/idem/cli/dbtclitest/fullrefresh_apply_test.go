package dbtclitest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/report"
)

// TestFullRefreshApply: run --full-refresh of an apply job rebuilds its
// target from the retained input of every batch, with the erasure between
// them replayed (an erased key stays erased), as a new snapshot of kind
// full_refresh that rerun reproduces (with IDEM_LONG=1 also after a later
// batch). A batch whose retained input is gone is read from its landing
// file while that holds the recorded bytes, and retained again; else the
// rebuild is refused (exit 3) naming the batch, and nothing is committed.
func TestFullRefreshApply(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Write("input/src2.csv", "id,day,zone,amount\n1,2024-01-01,1,11.00\n4,2024-01-03,2,4.00\n")
	p.Write("input/src3.csv", "id,day,zone,amount\n5,2024-01-04,1,1.00\n")
	db := p.DB("p")
	ok := func(r clitest.CLIResult) {
		t.Helper()
		require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	}
	ok(p.Idem("run", p.Path("src.toml")))
	ok(p.Idem("run", p.Path("src.toml"), "--input", p.Path("input/src2.csv")))
	ok(p.Idem("erase", p.Path("src.toml"), "--key", "4"))
	rows := `SELECT id || ' ' || amount || ' ' || idem_status FROM src ORDER BY id`
	before := clitest.QueryStrs(t, db, rows)
	require.Equal(t, []string{"1 11.00 active", "2 5.50 active", "3 7.25 active"}, before)

	type result struct {
		Decision    string `json:"decision"`
		Snapshot    int64  `json:"snapshot"`
		FullRefresh bool   `json:"full_refresh"`
	}
	// The first batch's retained input is gone: its landing file, still
	// holding the recorded bytes, stands in for it and is retained again.
	sum := clitest.QueryStrs(t, db, `SELECT json_extract_string(inputs, '$.files[0].sha256') FROM idem.snapshots WHERE job = 'src' AND snapshot = 1`)[0]
	retained := filepath.Join(db+".inputs", sum[:2], sum)
	require.NoError(t, os.Remove(retained))
	r := p.Idem("run", p.Path("src.toml"), "--full-refresh", "--json")
	ok(r)
	var res result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	require.Equal(t, result{Decision: "loaded", Snapshot: 4, FullRefresh: true}, res)
	require.Equal(t, before, clitest.QueryStrs(t, db, rows), "the same batches, the same rows: key 4 stays erased")
	require.Equal(t, []string{"1 applied", "2 applied", "3 erase", "4 full_refresh"}, clitest.QueryStrs(t, db, `SELECT snapshot || ' ' || kind FROM idem.snapshots WHERE job = 'src' ORDER BY snapshot`))
	require.FileExists(t, retained)
	clitest.RequireStoreIsCommitted(t, db)

	rerun := func(want int64) {
		t.Helper()
		r := p.Idem("rerun", p.Path("src.toml"), "--from-start", "--json")
		ok(r)
		var rr struct {
			Snapshot   int64 `json:"snapshot"`
			Reproduced bool  `json:"reproduced"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &rr), r.Stdout)
		require.Equal(t, want, rr.Snapshot)
		require.True(t, rr.Reproduced, r.Stdout)
	}
	rerun(4)
	if clitest.LongTests() { // a batch after the refresh, and a rerun over both
		ok(p.Idem("run", p.Path("src.toml"), "--input", p.Path("input/src3.csv")))
		rerun(5)
	}

	// Edited in the landing folder too: refused, nothing written.
	require.NoError(t, os.Remove(retained))
	p.Write("input/src.csv", "id,day,zone,amount\n1,2024-01-01,1,99.00\n")
	state := clitest.CaptureState(t, db)
	r = p.Idem("run", p.Path("src.toml"), "--full-refresh")
	require.Equal(t, report.ExitRefused, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stderr, "--full-refresh cannot rebuild src: batch src.csv (snapshot 1) has lost its retained input src.csv (sha256 "+report.Short(sum)+"), and the landing folder holds no file of that name and sha256")
	require.Equal(t, state, clitest.CaptureState(t, db))
}
