package datatest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

// retentionChainProject writes upstreamApplyProject's chain vc → src →
// down into dir, down (merge_by_key applying src's changes) with
// [retention] checkpoint_every = 2 and retention, and ip, a model of src
// incremental by partition, with [retention] retention when not empty.
func retentionChainProject(t *testing.T, dir, retention string) {
	upstreamApplyProject(t, dir)
	down := filepath.Join(dir, "jobs", "down.toml")
	text, err := os.ReadFile(down)
	require.NoError(t, err)
	clitest.WriteText(t, down, string(text)+"[retention]\ncheckpoint_every = 2\n"+retention)
	if retention != "" {
		retention = "[retention]\n" + retention
	}
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "ip.toml"), `name = "ip"
pipeline = "select"
database = "../chain.duckdb"
[input]
upstream = ["src"]
[transform]
sql = "models/ip.sql"
[target]
key = ["entity_id"]
partition_by = "entity_id"
incremental = "partition"
`+retention+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "models", "ip.sql"), "SELECT entity_id, value FROM {{upstream:src}}\n")
}

// TestExpireKeepsRerunPins is issue 43's retention across a chain: a
// merge_by_key job fed by src's changes with checkpoint_every = 2 keeps its
// checkpoints; src's expiry keeps every snapshot that the rerun of a kept
// snapshot of a downstream job reads (the apply job's after its
// checkpoint, the model's the one it pinned: an incremental model's rerun
// replays that snapshot alone, as any model's does) and names the pins, in
// expire --dry-run and du; every kept downstream snapshot reruns. Once the
// downstream jobs keep fewer snapshots, src expires up to what they hold.
func TestExpireKeepsRerunPins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	retentionChainProject(t, dir, "")
	db := filepath.Join(dir, "chain.duckdb")
	jobs := filepath.Join(dir, "jobs")
	path := func(name string) string { return filepath.Join(jobs, name+".toml") }
	for i := 1; i <= 3; i++ {
		if i > 1 { // b1.jsonl is upstreamApplyProject's
			clitest.WriteFile(t, filepath.Join(dir, "changes", fmt.Sprintf("b%d.jsonl", i)),
				fmt.Sprintf(`{"change_id":"%d","entity_id":"e%d","source_version":1,"operation":"upsert","value":"v%d"}`+"\n", i+2, i, i))
		}
		code, out, errOut := clitest.InProcess(t, "run", jobs)
		require.Equal(t, 0, code, out+errOut)
	}
	require.Equal(t, []string{"down 2"}, clitest.QueryStrs(t, db, `SELECT job || ' ' || snapshot FROM idem.checkpoints ORDER BY ALL`),
		"the apply job over src's changes keeps the checkpoints checkpoint_every asks for")

	expire := func(args ...string) history.ExpireResult {
		t.Helper()
		r := clitest.CallIdem(t, append([]string{"expire"}, append(args, "--json")...)...)
		require.Equal(t, 0, r.Code, r.Stderr)
		var res history.ExpireResult
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
		return res
	}
	reruns := func(name string, from, to int64) {
		t.Helper()
		for s := from; s <= to; s++ {
			code, out, errOut := clitest.InProcess(t, "rerun", path(name), "--snapshot", fmt.Sprint(s), "--json")
			require.Equal(t, 0, code, "%s snapshot %d: %s", name, s, out+errOut)
			require.Contains(t, out, `"reproduced":true`, "%s snapshot %d", name, s)
		}
	}

	// Every snapshot of down and ip is kept, and the rerun of their
	// first reads src's snapshot 1: src expires nothing and says why.
	code, out, errOut := clitest.InProcess(t, "expire", path("src"), "--keep-snapshots", "2", "--dry-run")
	require.Equal(t, 0, code, out+errOut)
	for _, name := range []string{"down", "ip"} {
		require.Contains(t, out, "  held by      "+name+" (the rerun of its kept snapshot 1 reads snapshot 1)\n")
	}
	res := expire(path("src"), "--keep-snapshots", "2")
	require.Equal(t, int64(1), res.OldestKept)
	require.Equal(t, map[string]int64{"down": 1, "ip": 1}, res.HeldBy)
	// Every kept snapshot of down reruns; a model's rerun is one load of
	// the snapshot it pinned, so its oldest kept stands for the others.
	reruns("down", 1, 3)
	reruns("ip", 1, 1)

	// The downstream jobs keep fewer snapshots: down keeps 2 and 3, whose
	// reruns start from checkpoint 2 (3 reads src's changes from 2), ip
	// keeps 2 and 3, which pinned src 2 and 3.
	retentionChainProject(t, dir, "keep_snapshots = 2\n")
	for _, name := range []string{"down", "ip"} {
		require.Equal(t, int64(2), expire(path(name)).OldestKept, name)
	}
	code, out, errOut = clitest.InProcess(t, "du", path("src"))
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "  held by       down (the rerun of its kept snapshot 3 reads snapshot 2)\n"+
		"  held by       down (its next read of changes starts at snapshot 3)\n"+
		"  held by       ip (the rerun of its kept snapshot 2 reads snapshot 2)\n")
	require.Regexp(t, `\n +2 .*  held by down at 2, ip at 2\n`, out)
	code, out, errOut = clitest.InProcess(t, "expire", path("src"), "--keep-snapshots", "1", "--dry-run")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "src: would expire snapshots 1-1\n")
	require.Contains(t, out, "  held by      down (the rerun of its kept snapshot 3 reads snapshot 2)\n")
	res = expire(path("src"), "--keep-snapshots", "1")
	require.Equal(t, int64(2), res.OldestKept)
	require.Equal(t, []history.Pin{{Job: "down", Snapshot: 2, Rerun: 3}, {Job: "ip", Snapshot: 2, Rerun: 2}}, res.Pins)
	reruns("down", 2, 3)
	reruns("ip", 2, 2)
	r := clitest.CallIdem(t, "export", path("src"), "--snapshot", "1", "--out", filepath.Join(dir, "src1.csv"))
	require.Equal(t, report.ExitRefused, r.Code, r.Stderr)
	_, err := os.Stat(filepath.Join(dir, "src1.csv"))
	require.True(t, os.IsNotExist(err))
}
