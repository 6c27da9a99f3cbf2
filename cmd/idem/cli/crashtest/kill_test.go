package crashtest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// The kill test: idem runs as a subprocess and is SIGKILLed at every fault
// point (IDEM_FAULT) and after random delays. After each kill the database
// must reopen holding exactly the state before the run or exactly the state
// after it, never a mix, and a retry must bring it to exactly the state one
// clean run gives.
//
// The default run covers every fault point on one scenario (the next point
// on the next scenario, so each scenario meets about a quarter of them; at
// one step each, a different one per point) and two random kills;
// IDEM_LONG=1
// runs every fault point at every step of every scenario and 300 random
// kills (IDEM_KILL_TRIALS=N sets that number). The references and the
// retries run in-process: only the killed command needs a process.

// killStep is one run of a scenario: a job file and extra flags.
type killStep struct {
	job  string
	args []string
}

type killScenario struct {
	name  string
	steps []killStep
	// refs[k] is the folder holding the database after k clean runs, and
	// dumps[k] its state.
	refs  []string
	dumps []string
	// took[k] is how long clean run k+1 takes in a process of its own,
	// measured on first use (random kills only).
	took []clitest.Once[time.Duration]
}

// faultPoints are the IDEM_FAULT values tested, with whether the database
// must then hold the post-run state (the kill came after COMMIT).
var faultPoints = []struct {
	point string
	post  bool
}{
	{"before_begin", false},
	{"after_step:01_stage.sql", false},
	{"after_step:02_rank.sql", false},
	{"after_step:03_outcomes.sql", false},
	{"after_step:04_commit.sql", false},
	{"after_target", false},
	{"before_commit", false},
	{"after_commit", true},
	{"checkpoint", true},
	{"checkpoint:3ms", true},
	{"after_checkpoint", true},
	// The CHECKPOINT of the commit, which the run left in the WAL, when
	// the command closes the database (internal/run/settle.go).
	{"settle", true},
	{"after_settle", true},
}

func TestKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill test runs idem as a subprocess; skipped with -short")
	}
	long := clitest.LongTests()
	trials := clitest.KillTrials(t, 2, 300)
	dir := t.TempDir()
	scenarios := killScenarios(t, dir)
	for _, sc := range scenarios {
		buildRefs(t, dir, sc)
	}

	t.Run("fault_points", func(t *testing.T) {
		var kills, during atomic.Int64
		t.Cleanup(func() {
			t.Logf("fault points: %d kills, all pre- or post-run as expected; %d of the checkpoint kills landed inside CHECKPOINT", kills.Load(), during.Load())
		})
		for i, sc := range scenarios {
			for j, fp := range faultPoints {
				if !long && (i+j)%len(scenarios) != 0 {
					continue // the default run: each point on one scenario, a different one for the next point
				}
				steps := []int{(i + j) % len(sc.steps)}
				if long {
					steps = steps[:0]
					for k := range sc.steps {
						steps = append(steps, k)
					}
				}
				for _, k := range steps {
					t.Run(fmt.Sprintf("%s/%s/run%d", sc.name, fp.point, k+1), func(t *testing.T) {
						t.Parallel()
						work := filepath.Join(t.TempDir(), "db")
						clitest.CopyDir(t, sc.refs[k], work)
						r := runIdem(t, sc.steps[k], work, fp.point, 0)
						require.True(t, r.Killed, "IDEM_FAULT=%s: the run was not killed (exit %d)\nstderr: %s", fp.point, r.Code, r.Stderr)
						kills.Add(1)
						if strings.Contains(r.Stderr, "during CHECKPOINT") || strings.Contains(r.Stderr, "after CHECKPOINT began") {
							during.Add(1)
						}
						want, name := sc.dumps[k], "pre-run"
						if fp.post {
							want, name = sc.dumps[k+1], "post-run"
						}
						got := crashedState(t, work, sc.refs[k], sc.dumps[k])
						require.True(t, got == want, "after a kill at %s the database does not hold the %s state: %s", fp.point, name, clitest.FirstDiff(want, got))
						retry(t, sc, k, work, fp.post)
					})
				}
			}
		}
	})

	t.Run("rollback", func(t *testing.T) {
		killRollback(t, scenarios[1])
	})
	t.Run("rerun", func(t *testing.T) {
		killRerun(t, scenarios[1])
	})

	t.Run("random_kills", func(t *testing.T) {
		var mu sync.Mutex
		counts := map[string]int{}
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
		for i := range trials {
			sc := scenarios[rng.IntN(len(scenarios))]
			k := rng.IntN(len(sc.steps))
			seed := rng.Uint64()
			t.Run(fmt.Sprintf("trial%d", i), func(t *testing.T) {
				t.Parallel()
				delay := time.Duration(rand.New(rand.NewPCG(seed, 2)).Int64N(int64(sc.tookStep(t, k)) + 1))
				work := filepath.Join(t.TempDir(), "db")
				clitest.CopyDir(t, sc.refs[k], work)
				r := runIdem(t, sc.steps[k], work, "", delay)
				var landed string
				switch {
				case !r.Killed:
					require.Equal(t, 0, r.Code, "trial %d (%s run %d, kill after %s): stderr: %s", i, sc.name, k+1, delay, r.Stderr)
					landed = "finished"
				default:
					got := crashedState(t, work, sc.refs[k], sc.dumps[k])
					switch got {
					case sc.dumps[k]:
						landed = "pre-run"
					case sc.dumps[k+1]:
						landed = "post-run"
					default:
						mu.Lock()
						counts["mix"]++
						mu.Unlock()
						require.Failf(t, "mixed state", "trial %d (%s run %d, kill after %s): neither the pre-run nor the post-run state; vs pre: %s\nvs post: %s",
							i, sc.name, k+1, delay, clitest.FirstDiff(sc.dumps[k], got), clitest.FirstDiff(sc.dumps[k+1], got))
					}
				}
				if landed != "finished" {
					retry(t, sc, k, work, landed == "post-run")
				} else {
					require.Equal(t, sc.dumps[k+1], clitest.DumpState(t, filepath.Join(work, "idem.duckdb")))
				}
				mu.Lock()
				counts[landed]++
				mu.Unlock()
			})
		}
		t.Cleanup(func() {
			t.Logf("random kills: %d trials: %d landed pre-run (rolled back), %d post-run (committed), %d finished before the kill, %d mixed",
				trials, counts["pre-run"], counts["post-run"], counts["finished"], counts["mix"])
		})
	})
}

// retry runs step k again without a fault on the crashed database, as the
// next command would (in-process: it needs no process of its own), and
// requires exactly the state of k+1 clean runs, and the decision that says
// whether the crashed run had committed.
func retry(t *testing.T, sc *killScenario, k int, work string, committed bool) {
	t.Helper()
	r := runClean(t, sc.steps[k], work)
	require.Equal(t, 0, r.Code, "retry: stderr: %s", r.Stderr)
	var res struct{ Decision string }
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), "retry output: %s", r.Stdout)
	if committed {
		require.Contains(t, []string{"skipped", "already_committed"}, res.Decision, "retry after a committed run")
	} else {
		require.Contains(t, []string{"loaded", "applied"}, res.Decision, "retry after a rolled-back run")
	}
	got := clitest.DumpState(t, filepath.Join(work, "idem.duckdb"))
	require.True(t, got == sc.dumps[k+1], "retry does not give the state of one clean run: %s", clitest.FirstDiff(sc.dumps[k+1], got))
}

// crashedState is the state of the database a killed command left in work,
// read without changing anything (the WAL replayed in memory), so the next
// command finds it as the crash left it. When the database file and its WAL
// are byte for byte those of the reference folder ref (whose state is
// refDump), that is its state, and DuckDB need not open it.
func crashedState(t *testing.T, work, ref, refDump string) string {
	t.Helper()
	db := filepath.Join(work, "idem.duckdb")
	if ref != "" && clitest.SameFile(t, db, filepath.Join(ref, "idem.duckdb")) && clitest.SameFile(t, db+".wal", filepath.Join(ref, "idem.duckdb.wal")) {
		return refDump
	}
	return clitest.DumpState(t, db)
}

// stepArgs is the command line of `idem run` for step on the database in
// folder work.
func stepArgs(step killStep, work string) []string {
	return append([]string{"run", step.job, "--db", filepath.Join(work, "idem.duckdb"), "--json"}, step.args...)
}

// runIdem runs `idem run` for step on the database in folder work in a
// child process. A fault point sets IDEM_FAULT; a delay above zero SIGKILLs
// the process after it.
func runIdem(t *testing.T, step killStep, work, fault string, delay time.Duration) clitest.CLIResult {
	t.Helper()
	return clitest.RunIdemCmd(t, work, fault, delay, nil, stepArgs(step, work)...)
}

// runClean runs `idem run` for step on the database in folder work
// in-process.
func runClean(t *testing.T, step killStep, work string) clitest.CLIResult {
	t.Helper()
	return clitest.CallIdem(t, stepArgs(step, work)...)
}

// killScenarios are the runs each kill starts from and makes: the sample
// refresh (first load with a PRIMARY KEY table, an input change, a schema
// and transform change that rebuilds the table), a partitioned sample job
// (two of five partitions replaced, one explicitly empty, a moved key
// repaired), versioned_changes batches,
// and versioned_changes batches with cursor bounds, one of them empty.
func killScenarios(t *testing.T, dir string) []*killScenario {
	t.Helper()
	root := clitest.RepoRoot(t)
	fx := func(p string) string { return filepath.Join(root, "fixtures", p) }
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	sample := func(v int) string {
		return write(fmt.Sprintf("sample_v%d.toml", v), fmt.Sprintf(`name = "sample"
pipeline = "sample"
transform_version = %d
schema_version = %d
[input]
path = %q
[target]
table = "occurrence_sample"
[params]
cap = 40
`+clitest.DuckdbSection, v, v, fx("sample/occurrences-a.csv")))
	}
	s1, s2 := sample(1), sample(2)
	changes := write("changes.toml", fmt.Sprintf(`name = "customer_state"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
[input]
path = %q
[target]
table = "customer_state"
`+clitest.DuckdbSection, fx("changes/batch-1.jsonl")))
	empty := write("empty.jsonl", "")
	var days []string
	for d := 45; d <= 49; d++ {
		for i := range 3 {
			days = append(days, fmt.Sprintf("%d,1,%d,CC0 1.0", d*10+i, d))
		}
	}
	header := "id,species_id,year,license\n"
	days5 := write("days.csv", header+strings.Join(days, "\n")+"\n")
	// Day 46 replaced (450 moves in from 45), day 47 explicitly empty.
	day46 := write("day46.csv", header+"450,1,46,CC0 1.0\n460,1,46,CC BY 4.0\n")
	parts := write("parts.toml", fmt.Sprintf(`name = "occ"
pipeline = "sample"
transform_version = 1
schema_version = 1
[input]
path = %q
[target]
table = "occ"
partition_by = "year"
`+clitest.DuckdbSection, days5))
	in := func(p string, more ...string) []string { return append([]string{"--input", p}, more...) }
	return []*killScenario{
		{name: "sample_refresh", steps: []killStep{
			{s1, nil},
			{s1, in(fx("sample/occurrences-b.csv"))},
			{s2, in(fx("sample/occurrences-b.csv"))},
		}},
		{name: "changes_apply", steps: []killStep{
			{changes, nil},
			{changes, in(fx("changes/batch-2.jsonl"))},
			{changes, in(fx("changes/batch-3.jsonl"))},
			{changes, in(fx("changes/batch-1-replayed.jsonl"))},
		}},
		{name: "changes_bounds", steps: []killStep{
			{changes, in(fx("changes/batch-1.jsonl"), "--from", "0", "--to", "15")},
			{changes, in(fx("changes/batch-2.jsonl"), "--from", "15", "--to", "23")},
			{changes, in(empty, "--from", "23", "--to", "30", "--batch-id", "empty-23-30")},
			{changes, in(fx("changes/batch-3.jsonl"), "--from", "30", "--to", "34")},
		}},
		{name: "sample_partitions", steps: []killStep{
			{parts, nil},
			{parts, in(day46, "--partitions", "46,47")},
		}},
	}
}

// buildRefs makes the reference databases of a scenario by clean runs
// (in-process): the state before any run (idem's own tables only) and after
// each run.
func buildRefs(t *testing.T, dir string, sc *killScenario) {
	t.Helper()
	base := filepath.Join(dir, "refs", sc.name)
	work := filepath.Join(base, "work")
	require.NoError(t, os.MkdirAll(work, 0o755))
	// State 0 is an empty folder: the first run creates the database. Its
	// dump is that of a database holding idem's own tables only.
	for k := 0; k <= len(sc.steps); k++ {
		if k > 0 {
			r := runClean(t, sc.steps[k-1], work)
			require.Equal(t, 0, r.Code, "%s clean run %d: %s", sc.name, k, r.Stderr)
			require.NotContains(t, r.Stdout, `"decision":"skipped"`)
			require.NotContains(t, r.Stdout, `"decision":"already_committed"`)
		}
		ref := filepath.Join(base, strconv.Itoa(k))
		clitest.CopyDir(t, work, ref)
		sc.refs = append(sc.refs, ref)
		if k == 0 {
			// No database yet: a kill leaves none or a new one.
			sc.dumps = append(sc.dumps, clitest.NewDatabaseState(t))
		} else {
			sc.dumps = append(sc.dumps, clitest.DumpState(t, filepath.Join(ref, "idem.duckdb")))
		}
		if k > 0 {
			require.NotEqual(t, sc.dumps[k-1], sc.dumps[k], "%s run %d changed nothing", sc.name, k)
		}
	}
	sc.took = make([]clitest.Once[time.Duration], len(sc.steps))
}

// tookStep is how long clean run k+1 of the scenario takes in a process of
// its own, measured once.
func (sc *killScenario) tookStep(t *testing.T, k int) time.Duration {
	return sc.took[k].Get(t, func(t *testing.T) time.Duration {
		work := filepath.Join(t.TempDir(), "db")
		clitest.CopyDir(t, sc.refs[k], work)
		start := time.Now()
		r := runIdem(t, sc.steps[k], work, "", 0)
		require.Equal(t, 0, r.Code, r.Stderr)
		return time.Since(start)
	})
}

// killRollback kills `idem rollback --to-snapshot 1 --expect-parent 2` of
// the scenario's job at each of its fault points, from the state after two
// runs: the database holds exactly the state before or after a clean
// rollback, and a retry brings it to the state after (refused as a stale
// parent, exit 3, when the killed rollback had committed).
func killRollback(t *testing.T, sc *killScenario) {
	job := sc.steps[0].job
	args := func(work string) []string {
		return []string{"rollback", job, "--db", filepath.Join(work, "idem.duckdb"), "--to-snapshot", "1", "--expect-parent", "2", "--json"}
	}
	clean := filepath.Join(t.TempDir(), "clean")
	clitest.CopyDir(t, sc.refs[2], clean)
	r := clitest.CallIdem(t, args(clean)...)
	require.Equal(t, 0, r.Code, r.Stderr)
	pre, post := sc.dumps[2], clitest.DumpState(t, filepath.Join(clean, "idem.duckdb"))
	require.NotEqual(t, pre, post)
	for _, fp := range []struct {
		point string
		post  bool
	}{
		{"before_begin", false}, {"after_target", false}, {"before_commit", false},
		{"after_commit", true}, {"checkpoint", true}, {"after_checkpoint", true},
	} {
		t.Run(fp.point, func(t *testing.T) {
			t.Parallel()
			work := filepath.Join(t.TempDir(), "db")
			clitest.CopyDir(t, sc.refs[2], work)
			r := clitest.KillCLI(t, work, fp.point, 0, args(work)...)
			require.True(t, r.Killed, "IDEM_FAULT=%s: not killed (exit %d): %s", fp.point, r.Code, r.Stderr)
			want := pre
			if fp.post {
				want = post
			}
			got := crashedState(t, work, sc.refs[2], pre)
			require.True(t, got == want, "after a kill at %s: %s", fp.point, clitest.FirstDiff(want, got))
			r = clitest.CallIdem(t, args(work)...)
			if fp.post {
				require.Equal(t, 3, r.Code, "retry after a committed rollback: %s", r.Stderr)
				require.Contains(t, r.Stderr, "stale parent")
			} else {
				require.Equal(t, 0, r.Code, "retry: %s", r.Stderr)
			}
			got = clitest.DumpState(t, filepath.Join(work, "idem.duckdb"))
			require.True(t, got == post, "retry: %s", clitest.FirstDiff(post, got))
		})
	}
}

// killRerun kills `idem rerun` of the scenario's job while it replays in
// its scratch database and before it compares: the database is unchanged,
// nothing is left in $TMPDIR, the scratch folder left beside the database
// is removed by the next rerun, which reproduces the snapshot.
func killRerun(t *testing.T, sc *killScenario) {
	job := sc.steps[0].job
	for _, point := range []string{"after_step:02_rank.sql", "after_commit", "rerun_export"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			work := filepath.Join(t.TempDir(), "db")
			clitest.CopyDir(t, sc.refs[2], work)
			db := filepath.Join(work, "idem.duckdb")
			tmp := t.TempDir()
			args := []string{"rerun", job, "--db", db, "--json"}
			r := clitest.RunIdemCmd(t, work, point, 0, []string{"TMPDIR=" + tmp}, args...)
			require.True(t, r.Killed, "IDEM_FAULT=%s: not killed (exit %d): %s", point, r.Code, r.Stderr)
			left, err := filepath.Glob(db + ".rerun-*")
			require.NoError(t, err)
			require.Len(t, left, 1, "the killed rerun's scratch folder is beside the database")
			entries, err := os.ReadDir(tmp)
			require.NoError(t, err)
			require.Empty(t, entries, "the rerun wrote to $TMPDIR")
			got := crashedState(t, work, sc.refs[2], sc.dumps[2])
			require.True(t, got == sc.dumps[2], "a killed rerun changed the database: %s", clitest.FirstDiff(sc.dumps[2], got))

			r = clitest.CallIdem(t, args...)
			require.Equal(t, 0, r.Code, "retry: %s", r.Stderr)
			require.Contains(t, r.Stdout, `"reproduced":true`)
			left, err = filepath.Glob(db + ".rerun-*")
			require.NoError(t, err)
			require.Empty(t, left, "the next rerun removes the scratch folder a killed one left")
		})
	}
}
