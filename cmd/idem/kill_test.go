package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The kill test: idem runs as a subprocess and is SIGKILLed at every fault
// point (IDEM_FAULT) and after random delays. After each kill the database
// must reopen holding exactly the state before the run or exactly the state
// after it, never a mix, and a retry must bring it to exactly the state one
// clean run gives.
//
// The normal test run covers every fault point on every scenario once and a
// few random kills. IDEM_KILL_TRIALS=N runs every fault point at every step
// of every scenario plus N random kills, and logs the figures.

// killStep is one run of a scenario: a job file and extra flags.
type killStep struct {
	job  string
	args []string
}

type killScenario struct {
	name  string
	steps []killStep
	// refs[k] is the folder holding the database after k clean runs, and
	// dumps[k] its state; took[k] is how long clean run k+1 took.
	refs  []string
	dumps []string
	took  []time.Duration
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
}

func TestKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test builds the binary and runs it as a subprocess; skipped with -short")
	}
	trials, long := killTrials(t, 6)
	dir := t.TempDir()
	bin := buildIdem(t, dir)
	scenarios := killScenarios(t, dir)
	for _, sc := range scenarios {
		buildRefs(t, bin, dir, sc)
	}

	t.Run("fault_points", func(t *testing.T) {
		var kills, during atomic.Int64
		t.Cleanup(func() {
			t.Logf("fault points: %d kills, all pre- or post-run as expected; %d of the checkpoint kills landed inside CHECKPOINT", kills.Load(), during.Load())
		})
		for i, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				for j, fp := range faultPoints {
					steps := []int{(i + j) % len(sc.steps)}
					if long {
						steps = steps[:0]
						for k := range sc.steps {
							steps = append(steps, k)
						}
					}
					for _, k := range steps {
						t.Run(fmt.Sprintf("%s/run%d", fp.point, k+1), func(t *testing.T) {
							work := filepath.Join(t.TempDir(), "db")
							copyDir(t, sc.refs[k], work)
							r := runIdem(t, bin, sc.steps[k], work, fp.point, 0)
							require.True(t, r.killed, "IDEM_FAULT=%s: the run was not killed (exit %d)\nstderr: %s", fp.point, r.code, r.stderr)
							kills.Add(1)
							if strings.Contains(r.stderr, "during CHECKPOINT") || strings.Contains(r.stderr, "after CHECKPOINT began") {
								during.Add(1)
							}
							want, name := sc.dumps[k], "pre-run"
							if fp.post {
								want, name = sc.dumps[k+1], "post-run"
							}
							got := crashedState(t, work)
							require.True(t, got == want, "after a kill at %s the database does not hold the %s state: %s", fp.point, name, firstDiff(want, got))
							retry(t, bin, sc, k, work, fp.post)
						})
					}
				}
			})
		}
	})

	t.Run("rollback", func(t *testing.T) {
		killRollback(t, bin, scenarios[1])
	})
	t.Run("rerun", func(t *testing.T) {
		killRerun(t, bin, scenarios[1])
	})

	t.Run("random_kills", func(t *testing.T) {
		var mu sync.Mutex
		counts := map[string]int{}
		workers := 2
		for w := range workers {
			t.Run(fmt.Sprintf("worker%d", w), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
				for i := w; i < trials; i += workers {
					sc := scenarios[rng.IntN(len(scenarios))]
					k := rng.IntN(len(sc.steps))
					delay := time.Duration(rng.Int64N(int64(sc.took[k]) + 1))
					work := filepath.Join(t.TempDir(), fmt.Sprintf("trial%d", i))
					copyDir(t, sc.refs[k], work)
					r := runIdem(t, bin, sc.steps[k], work, "", delay)
					var landed string
					switch {
					case !r.killed:
						require.Equal(t, 0, r.code, "trial %d (%s run %d, kill after %s): stderr: %s", i, sc.name, k+1, delay, r.stderr)
						landed = "finished"
					default:
						got := crashedState(t, work)
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
								i, sc.name, k+1, delay, firstDiff(sc.dumps[k], got), firstDiff(sc.dumps[k+1], got))
						}
					}
					if landed != "finished" {
						retry(t, bin, sc, k, work, landed == "post-run")
					} else {
						require.Equal(t, sc.dumps[k+1], dumpState(t, filepath.Join(work, "idem.duckdb")))
					}
					mu.Lock()
					counts[landed]++
					mu.Unlock()
				}
			})
		}
		t.Cleanup(func() {
			t.Logf("random kills: %d trials: %d landed pre-run (rolled back), %d post-run (committed), %d finished before the kill, %d mixed",
				trials, counts["pre-run"], counts["post-run"], counts["finished"], counts["mix"])
		})
	})
}

// retry runs step k again without a fault on the crashed database and
// requires exactly the state of k+1 clean runs, and the decision that says
// whether the crashed run had committed.
func retry(t *testing.T, bin string, sc *killScenario, k int, work string, committed bool) {
	t.Helper()
	r := runIdem(t, bin, sc.steps[k], work, "", 0)
	require.Equal(t, 0, r.code, "retry: stderr: %s", r.stderr)
	var res struct{ Decision string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), "retry output: %s", r.stdout)
	if committed {
		require.Contains(t, []string{"skipped", "already_committed"}, res.Decision, "retry after a committed run")
	} else {
		require.Contains(t, []string{"loaded", "applied"}, res.Decision, "retry after a rolled-back run")
	}
	got := dumpState(t, filepath.Join(work, "idem.duckdb"))
	require.True(t, got == sc.dumps[k+1], "retry does not give the state of one clean run: %s", firstDiff(sc.dumps[k+1], got))
}

// crashedState dumps a copy of the crashed database, so the original stays
// as the crash left it (with its WAL) for the retry.
func crashedState(t *testing.T, work string) string {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "inspect")
	copyDir(t, work, cp)
	return dumpState(t, filepath.Join(cp, "idem.duckdb"))
}

type idemResult struct {
	code           int
	killed         bool
	stdout, stderr string
}

// killTrials is the number of random kills a kill test makes: def, or
// IDEM_KILL_TRIALS when set (long then reports that it was).
func killTrials(t *testing.T, def int) (trials int, long bool) {
	t.Helper()
	s := os.Getenv("IDEM_KILL_TRIALS")
	if s == "" {
		return def, false
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "IDEM_KILL_TRIALS must be an integer")
	return n, true
}

// runIdem runs `idem run` for step on the database in folder work. A fault
// point sets IDEM_FAULT; a delay above zero SIGKILLs the process after it.
func runIdem(t *testing.T, bin string, step killStep, work, fault string, delay time.Duration) idemResult {
	t.Helper()
	args := append([]string{"run", step.job, "--db", filepath.Join(work, "idem.duckdb"), "--json"}, step.args...)
	return runIdemCmd(t, bin, work, fault, delay, nil, args...)
}

// runIdemCmd runs idem with args in folder work, with IDEM_FAULT=fault and
// the extra environment env; a delay above zero SIGKILLs it after it.
func runIdemCmd(t *testing.T, bin, work, fault string, delay time.Duration, env []string, args ...string) idemResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = work
	cmd.Env = append(append(os.Environ(), "IDEM_FAULT="+fault), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	if delay > 0 {
		timer := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	r := idemResult{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		_, ok := err.(*exec.ExitError)
		require.True(t, ok, "run idem: %v", err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		require.Equal(t, syscall.SIGKILL, ws.Signal())
		r.killed = true
	} else {
		r.code = ws.ExitStatus()
	}
	return r
}

// buildIdem builds the CLI into dir with go build.
func buildIdem(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "idem")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// killScenarios are the runs each kill starts from and makes: the sample
// refresh (first load with a PRIMARY KEY table, an input change, a schema
// and transform change that rebuilds the table), a partitioned sample job
// (two of five partitions replaced, one explicitly empty, a moved key
// repaired), versioned_changes batches,
// and versioned_changes batches with cursor bounds, one of them empty.
func killScenarios(t *testing.T, dir string) []*killScenario {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
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
`, v, v, fx("sample/occurrences-a.csv")))
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
`, fx("changes/batch-1.jsonl")))
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
`, days5))
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

// buildRefs makes the reference databases of a scenario by clean runs: the
// state before any run (idem's own tables only) and after each run.
func buildRefs(t *testing.T, bin, dir string, sc *killScenario) {
	t.Helper()
	base := filepath.Join(dir, "refs", sc.name)
	work := filepath.Join(base, "work")
	require.NoError(t, os.MkdirAll(work, 0o755))
	// State 0 is an empty folder: the first run creates the database. Its
	// dump is that of a database holding idem's own tables only.
	for k := 0; k <= len(sc.steps); k++ {
		if k > 0 {
			start := time.Now()
			r := runIdem(t, bin, sc.steps[k-1], work, "", 0)
			sc.took = append(sc.took, time.Since(start))
			require.Equal(t, 0, r.code, "%s clean run %d: %s", sc.name, k, r.stderr)
			require.NotContains(t, r.stdout, `"decision":"skipped"`)
			require.NotContains(t, r.stdout, `"decision":"already_committed"`)
		}
		ref := filepath.Join(base, strconv.Itoa(k))
		copyDir(t, work, ref)
		sc.refs = append(sc.refs, ref)
		sc.dumps = append(sc.dumps, crashedState(t, ref))
		if k > 0 {
			require.NotEqual(t, sc.dumps[k-1], sc.dumps[k], "%s run %d changed nothing", sc.name, k)
		}
	}
}

// killRollback kills `idem rollback --to-snapshot 1 --expect-parent 2` of
// the scenario's job at each of its fault points, from the state after two
// runs: the database holds exactly the state before or after a clean
// rollback, and a retry brings it to the state after (refused as a stale
// parent, exit 3, when the killed rollback had committed).
func killRollback(t *testing.T, bin string, sc *killScenario) {
	job := sc.steps[0].job
	args := func(work string) []string {
		return []string{"rollback", job, "--db", filepath.Join(work, "idem.duckdb"), "--to-snapshot", "1", "--expect-parent", "2", "--json"}
	}
	clean := filepath.Join(t.TempDir(), "clean")
	copyDir(t, sc.refs[2], clean)
	r := runIdemCmd(t, bin, clean, "", 0, nil, args(clean)...)
	require.Equal(t, 0, r.code, r.stderr)
	pre, post := sc.dumps[2], crashedState(t, clean)
	require.NotEqual(t, pre, post)
	for _, fp := range []struct {
		point string
		post  bool
	}{
		{"before_begin", false}, {"after_target", false}, {"before_commit", false},
		{"after_commit", true}, {"checkpoint", true}, {"after_checkpoint", true},
	} {
		t.Run(fp.point, func(t *testing.T) {
			work := filepath.Join(t.TempDir(), "db")
			copyDir(t, sc.refs[2], work)
			r := runIdemCmd(t, bin, work, fp.point, 0, nil, args(work)...)
			require.True(t, r.killed, "IDEM_FAULT=%s: not killed (exit %d): %s", fp.point, r.code, r.stderr)
			want := pre
			if fp.post {
				want = post
			}
			got := crashedState(t, work)
			require.True(t, got == want, "after a kill at %s: %s", fp.point, firstDiff(want, got))
			r = runIdemCmd(t, bin, work, "", 0, nil, args(work)...)
			if fp.post {
				require.Equal(t, 3, r.code, "retry after a committed rollback: %s", r.stderr)
				require.Contains(t, r.stderr, "stale parent")
			} else {
				require.Equal(t, 0, r.code, "retry: %s", r.stderr)
			}
			got = dumpState(t, filepath.Join(work, "idem.duckdb"))
			require.True(t, got == post, "retry: %s", firstDiff(post, got))
		})
	}
}

// killRerun kills `idem rerun` of the scenario's job while it replays in
// its scratch database and before it compares: the database is unchanged,
// nothing is left in $TMPDIR, the scratch folder left beside the database
// is removed by the next rerun, which reproduces the snapshot.
func killRerun(t *testing.T, bin string, sc *killScenario) {
	job := sc.steps[0].job
	for _, point := range []string{"after_step:02_rank.sql", "after_commit", "rerun_export"} {
		t.Run(point, func(t *testing.T) {
			work := filepath.Join(t.TempDir(), "db")
			copyDir(t, sc.refs[2], work)
			db := filepath.Join(work, "idem.duckdb")
			tmp := t.TempDir()
			env := []string{"TMPDIR=" + tmp}
			args := []string{"rerun", job, "--db", db, "--json"}
			r := runIdemCmd(t, bin, work, point, 0, env, args...)
			require.True(t, r.killed, "IDEM_FAULT=%s: not killed (exit %d): %s", point, r.code, r.stderr)
			left, err := filepath.Glob(db + ".rerun-*")
			require.NoError(t, err)
			require.Len(t, left, 1, "the killed rerun's scratch folder is beside the database")
			entries, err := os.ReadDir(tmp)
			require.NoError(t, err)
			require.Empty(t, entries, "the rerun wrote to $TMPDIR")
			got := crashedState(t, work)
			require.True(t, got == sc.dumps[2], "a killed rerun changed the database: %s", firstDiff(sc.dumps[2], got))

			r = runIdemCmd(t, bin, work, "", 0, env, args...)
			require.Equal(t, 0, r.code, "retry: %s", r.stderr)
			require.Contains(t, r.stdout, `"reproduced":true`)
			left, err = filepath.Glob(db + ".rerun-*")
			require.NoError(t, err)
			require.Empty(t, left, "the next rerun removes the scratch folder a killed one left")
		})
	}
}
