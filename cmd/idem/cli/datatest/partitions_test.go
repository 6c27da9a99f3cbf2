package datatest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/diff"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/run"
	"github.com/stretchr/testify/require"
)

// partJob is a sample job partitioned by year ("day" 45..49 here), in its
// own folder with its own database.
type partJob struct {
	t        *testing.T
	dir, job string
	db       string
}

const partJobTOML = `name = "occ"
pipeline = "sample"
transform_version = 1
schema_version = 1
database = "idem.duckdb"
[input]
path = "all.csv"
[target]
table = "occ"
partition_by = "year"
`

func newPartJob(t *testing.T) *partJob {
	t.Helper()
	dir := t.TempDir()
	j := &partJob{t: t, dir: dir, job: filepath.Join(dir, "occ.toml"), db: filepath.Join(dir, "idem.duckdb")}
	clitest.WriteFile(t, j.job, partJobTOML+clitest.DuckdbSection)
	// Five partitions of three rows: ids day*10+0..2.
	var rows []string
	for d := 45; d <= 49; d++ {
		for i := range 3 {
			rows = append(rows, fmt.Sprintf("%d,1,%d,CC0 1.0", d*10+i, d))
		}
	}
	j.input("all.csv", rows...)
	return j
}

// input writes a CSV input of sample rows (id,species_id,year,license).
func (j *partJob) input(name string, rows ...string) string {
	p := filepath.Join(j.dir, name)
	clitest.WriteFile(j.t, p, "id,species_id,year,license\n"+strings.Join(rows, "\n")+"\n")
	return p
}

func (j *partJob) run(args ...string) run.Result {
	j.t.Helper()
	code, stdout, stderr := clitest.InProcess(j.t, append([]string{"run", j.job, "--json"}, args...)...)
	require.Equal(j.t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	var res run.Result
	require.NoError(j.t, json.Unmarshal([]byte(stdout), &res), stdout)
	return res
}

// export writes a pinned partitioned CSV export of snapshot s and returns
// each partition file's sha256 by partition value.
func (j *partJob) export(s int64) map[string]string {
	j.t.Helper()
	out := filepath.Join(j.dir, fmt.Sprintf("export-%d", s))
	code, stdout, stderr := clitest.InProcess(j.t, "export", j.job, "--snapshot", fmt.Sprint(s), "--format", "csv", "--partition-by", "year", "--out", out, "--json")
	require.Equal(j.t, 0, code, "stderr: %s", stderr)
	var res export.Result
	require.NoError(j.t, json.Unmarshal([]byte(stdout), &res))
	sums := map[string]string{}
	for _, f := range res.Files {
		sums[*f.Value] = f.SHA256
	}
	return sums
}

func (j *partJob) packet(s int64) catalog.Packet {
	j.t.Helper()
	code, stdout, stderr := clitest.InProcess(j.t, "show", j.job, "--snapshot", fmt.Sprint(s), "--json")
	require.Equal(j.t, 0, code, "stderr: %s", stderr)
	var p catalog.Packet
	require.NoError(j.t, json.Unmarshal([]byte(stdout), &p), stdout)
	return p
}

func (j *partJob) ids(year int) []int64 {
	return clitest.QueryInts(j.t, j.db, "SELECT id FROM occ WHERE year = ? ORDER BY id", year)
}

// Two of five partitions replaced, one of them explicitly empty: the other
// three are byte-identical in a pinned export, the packet's sha256 of each
// partition is its export's, diff names the two, an equal re-run is
// skipped and rerun rebuilds the snapshot.
func TestPartitionsReplaceExactlyTheDeclared(t *testing.T) {
	t.Parallel()
	j := newPartJob(t)
	first := j.run()
	require.Equal(t, []string{"45", "46", "47", "48", "49"}, first.Partitions, "without --partitions the run replaces the partitions its input holds")
	before := j.export(1)
	require.Len(t, before, 5)

	in := j.input("day46.csv", "460,1,46,CC BY 4.0", "463,1,46,CC0 1.0")
	res := j.run("--input", in, "--partitions", "46,47")
	require.Equal(t, "loaded", res.Decision)
	require.Equal(t, []string{"46", "47"}, res.Partitions)
	require.Empty(t, res.Repaired)
	require.Equal(t, int64(11), res.RowsOut)
	require.Equal(t, []int64{460, 463}, j.ids(46))
	require.Empty(t, j.ids(47), "a declared partition without staged rows becomes empty")

	after := j.export(2)
	for _, d := range []string{"45", "48", "49"} {
		require.Equal(t, before[d], after[d], "partition %s was not declared and must be byte-identical", d)
	}
	require.NotEqual(t, before["46"], after["46"])
	require.NotContains(t, after, "47")

	// The packet: one entry per touched partition; sha256 equals the
	// partition's pinned export.
	p := j.packet(2)
	require.Equal(t, int64(2), p.Snapshot)
	require.Equal(t, int64(1), p.Parent)
	require.Equal(t, "year", p.PartitionBy)
	require.Len(t, p.Entries, 2)
	require.Equal(t, "46", *p.Entries[0].Partition)
	require.Equal(t, after["46"], p.Entries[0].SHA256)
	require.Equal(t, int64(2), p.Entries[0].Rows)
	require.Equal(t, int64(2), p.Entries[0].DistinctKeys)
	require.Equal(t, "460", *p.Entries[0].Bounds["id"][0])
	require.Equal(t, "463", *p.Entries[0].Bounds["id"][1])
	require.Equal(t, "47", *p.Entries[1].Partition)
	require.Equal(t, int64(0), p.Entries[1].Rows)
	require.Nil(t, p.Entries[1].Bounds["id"][0])
	first1 := j.packet(1)
	require.Len(t, first1.Entries, 5)
	for _, e := range first1.Entries {
		require.Equal(t, before[*e.Partition], e.SHA256, "snapshot 1, partition %s", *e.Partition)
	}
	var parts struct{ Input string }
	require.NoError(t, json.Unmarshal(p.Parts, &parts))
	require.Equal(t, res.Inputs[0].SHA256, parts.Input)
	require.Equal(t, res.Inputs[0].SHA256, p.Inputs[0].SHA256)

	var diff diff.Result
	code, stdout, stderr := clitest.InProcess(t, "diff", j.job, "--from", "1", "--to", "2", "--json")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(stdout), &diff))
	require.Equal(t, []string{"46", "47"}, diff.Partitions)

	// The key covers the declared list: the same input and list skip, the
	// same input with another list does not.
	require.Equal(t, "skipped", j.run("--input", in, "--partitions", "47,46").Decision)
	code, stdout, stderr = clitest.InProcess(t, "plan", j.job, "--input", in, "--partitions", "46,47", "--json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"decision":"skipped"`, "plan computes the key as run does")
	other := j.run("--input", in, "--partitions", "46,47,49")
	require.Equal(t, "loaded", other.Decision)
	require.Equal(t, []string{"input"}, other.Changed)
	require.Empty(t, j.ids(49))

	for s := 1; s <= 3; s++ {
		code, stdout, stderr = clitest.InProcess(t, "rerun", j.job, "--snapshot", fmt.Sprint(s), "--json")
		require.Equal(t, 0, code, stderr)
		var rr history.RerunResult
		require.NoError(t, json.Unmarshal([]byte(stdout), &rr))
		require.True(t, rr.Reproduced, "rerun of snapshot %d: %s", s, stdout)
	}
}

// A staged row outside the declared partitions, or a bad --partitions,
// changes nothing: exit code, message and every idem table as before.
func TestPartitionsRefused(t *testing.T) {
	t.Parallel()
	j := newPartJob(t)
	j.run()
	plain := filepath.Join(j.dir, "plain.toml")
	clitest.WriteFile(t, plain, strings.Replace(partJobTOML, "partition_by = \"year\"\n", "", 1))
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"row outside", []string{j.job, "--input", j.input("out.csv", "460,1,46,CC0 1.0", "480,1,48,CC0 1.0"), "--partitions", "46,47"}, 3,
			"staged rows of occ lie in partition year = 48, outside --partitions 46,47"},
		{"not a value of the column", []string{j.job, "--input", j.input("x.csv", "460,1,46,CC0 1.0"), "--partitions", "46,x"}, 2,
			"--partitions 46,x: a value is not a INTEGER"},
		{"empty list", []string{j.job, "--partitions", ""}, 2, "--partitions names no partition"},
		{"job without partition_by", []string{plain, "--partitions", "46"}, 2, "job occ declares no [target] partition_by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := clitest.CaptureState(t, j.db)
			code, _, stderr := clitest.InProcess(t, append([]string{"run"}, tc.args...)...)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, stderr, tc.msg)
			require.Equal(t, before, clitest.CaptureState(t, j.db), "a refused run changes nothing")
		})
	}
	apply := filepath.Join(j.dir, "apply.toml")
	clitest.WriteFile(t, apply, `name = "orders"
pipeline = "orders"
transform_version = 1
schema_version = 1
[target]
partition_by = "event_day"
`)
	code, _, stderr := clitest.InProcess(t, "run", apply)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "target.partition_by")
	require.Contains(t, stderr, "partitions are replaced by refresh pipelines")
}

// A keyed row that moves from day 47 to day 48 is gone from 47 and present
// in 48 when only 48 is replaced; 47 is reported and packed as repaired.
func TestPartitionsRepairAMovedKey(t *testing.T) {
	t.Parallel()
	j := newPartJob(t)
	j.run()
	before := j.export(1)
	res := j.run("--input", j.input("day48.csv", "470,1,48,CC0 1.0", "480,1,48,CC0 1.0", "481,1,48,CC0 1.0", "482,1,48,CC0 1.0"), "--partitions", "48")
	require.Equal(t, []string{"48"}, res.Partitions)
	require.Equal(t, []string{"47"}, res.Repaired)
	require.Equal(t, []int64{471, 472}, j.ids(47))
	require.Equal(t, []int64{470, 480, 481, 482}, j.ids(48))
	require.Equal(t, int64(15), res.RowsOut)
	after := j.export(2)
	for _, d := range []string{"45", "46", "49"} {
		require.Equal(t, before[d], after[d])
	}
	p := j.packet(2)
	require.Len(t, p.Entries, 2)
	require.Equal(t, "47", *p.Entries[1].Partition)
	require.True(t, p.Entries[1].Repaired)
	require.Equal(t, after["47"], p.Entries[1].SHA256)
	require.Equal(t, after["48"], p.Entries[0].SHA256)

	code, stdout, _ := clitest.InProcess(t, "run", j.job, "--input", filepath.Join(j.dir, "day48.csv"), "--partitions", "48,49")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "partitions 48, 49\n", "human output names the partitions")
}

// The packet of a job without partition_by has one entry for the whole
// target, equal to its pinned CSV export; the orders packet counts the
// input rows by payload schema version.
func TestPacketOfOrders(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	e.Orders("day-47.jsonl")
	e.Orders("day-48.jsonl")
	for s := int64(1); s <= 2; s++ {
		var p catalog.Packet
		e.Ok(&p, "show", e.Config("orders"), "--snapshot", fmt.Sprint(s))
		exp, data := e.Export("orders", "--snapshot", fmt.Sprint(s), "--format", "csv")
		require.NotEmpty(t, data)
		require.Len(t, p.Entries, 1)
		require.True(t, p.Entries[0].Whole)
		require.Equal(t, exp.SHA256, p.Entries[0].SHA256)
		require.Equal(t, exp.Bytes, p.Entries[0].Bytes)
		require.Equal(t, exp.Rows, p.Entries[0].Rows)
		require.Equal(t, 1, p.TransformVersion)
		require.Equal(t, 1, p.SchemaVersion)
		require.NotEmpty(t, p.PayloadVersions)
	}
	var p catalog.Packet
	e.Ok(&p, "show", e.Config("orders"), "--snapshot", "1")
	require.Equal(t, map[string]int64{"v2": 2, "v3": 1}, p.PayloadVersions)
	require.Equal(t, map[string]int64{"accepted": 3}, p.Outcomes)
	out := e.Idem("show", e.Config("orders"))
	require.Equal(t, 0, out.Code, out.Stderr)
	require.Contains(t, out.Stdout, "orders: snapshot 2 (parent 1)")
	require.Contains(t, out.Stdout, "whole target:")

	// An erased key leaves no copy in any packet (here the min order id of
	// both snapshots).
	require.Contains(t, clitest.QueryStrs(t, e.DB, "SELECT packet FROM idem.packets ORDER BY snapshot")[0], `"ord-12"`)
	e.Ok(nil, "erase", e.Config("orders"), "--key", "ord-12")
	for _, packet := range clitest.QueryStrs(t, e.DB, "SELECT packet FROM idem.packets ORDER BY snapshot") {
		require.NotContains(t, packet, "ord-12")
	}
	_, err := os.Stat(e.DB)
	require.NoError(t, err)
}

// The audit of one day of a 30-day partitioned Parquet export reads one
// file of 30 and about 1/30 of the full scan's bytes, by DuckDB's profile.
func TestAuditOneDayOfThirty(t *testing.T) {
	t.Parallel()
	j := newPartJob(t)
	var rows []string
	for d := range 30 {
		for i := range 200 {
			rows = append(rows, fmt.Sprintf("%d,%d,%d,CC0 1.0", d*1000+i, i, d+30))
		}
	}
	in := j.input("d30.csv", rows...)
	j.run("--input", in)
	out := filepath.Join(j.dir, "lake")
	code, _, stderr := clitest.InProcess(t, "export", j.job, "--format", "parquet", "--partition-by", "year", "--out", out)
	require.Equal(t, 0, code, stderr)

	code, stdout, stderr := clitest.InProcess(t, "show", j.job, "--audit", "year = 47", "--export", out, "--json")
	require.Equal(t, 0, code, stderr)
	var a export.AuditResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &a), stdout)
	t.Logf("audit of one day of 30: %s", stdout)
	require.Equal(t, int64(200), a.Audit.Rows)
	require.Equal(t, int64(6000), a.Full.Rows)
	require.Equal(t, int64(1), a.Audit.Files)
	require.Equal(t, int64(30), a.Audit.FilesTotal)
	require.Equal(t, int64(30), a.Full.Files)
	require.Equal(t, int64(1), a.Audit.RowGroups)
	require.Equal(t, int64(30), a.Full.RowGroups)
	require.InDelta(t, 1.0/30, a.ByteRatio, 0.01, "one day reads about 1/30 of the bytes")
	require.Less(t, a.Audit.BytesRead*10, a.Full.BytesRead, "DuckDB's own total_bytes_read agrees")

	code, stdout, _ = clitest.InProcess(t, "show", j.job, "--audit", "year = 47", "--export", out)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "files 1/30, row groups 1")
	for _, bad := range [][]string{
		{"--audit", "year = 47"},
		{"--audit", "year = 47", "--export", j.dir},
	} {
		code, _, stderr = clitest.InProcess(t, append([]string{"show", j.job}, bad...)...)
		require.Equal(t, 2, code, stderr)
	}
}

// A model partitioned by a result column: its run replaces the partitions
// its result holds, and a key that moved to another day is removed from
// its old one.
func TestPartitionsOfAModel(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("facts", "p", []string{"src"}, []string{"id"}, "", "SELECT id, day, amount FROM {{upstream:src}} WHERE idem_status = 'active'\n")
	toml, err := os.ReadFile(p.Path("facts.toml"))
	require.NoError(t, err)
	p.Write("facts.toml", strings.Replace(string(toml), "[target]\n", "[target]\npartition_by = \"day\"\n", 1))
	r := p.Idem("run", p.Path("src.toml"), p.Path("facts.toml"), "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"partitions":["2024-01-01","2024-01-02"]`)

	p.Write("input/move.csv", "id,day,zone,amount\n3,2024-01-03,1,7.25\n")
	r = p.Idem("run", p.Path("src.toml"), "--input", p.Path("input/move.csv"), "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	r = p.Idem("run", p.Path("facts.toml"), "--json", "--partitions", "2024-01-03")
	require.Equal(t, 3, r.Code, "the model's result holds 2024-01-01 too: %s", r.Stderr)
	require.Contains(t, r.Stderr, "partition day = 2024-01-01")
	r = p.Idem("run", p.Path("facts.toml"), "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var res run.Result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
	require.Equal(t, []string{"2024-01-01", "2024-01-03"}, res.Partitions)
	require.Equal(t, []string{"2024-01-02"}, res.Repaired)
	require.Equal(t, []string{"2024-01-01|1", "2024-01-01|2", "2024-01-03|3"},
		clitest.QueryStrs(t, p.DB("p"), "SELECT CAST(day AS VARCHAR) || '|' || id FROM facts ORDER BY id"))
}
