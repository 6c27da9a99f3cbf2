package cli

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// chainProject writes the trips chain of configs/trips/ (trips from a
// landing folder, zones, the models trips_clean and trips_daily) into a new
// folder, with its database there, and returns the folder.
func chainProject(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	root := repoPath(t, "configs/trips")
	for _, f := range []string{"trips.toml", "zones.toml", "trips_clean.toml", "trips_daily.toml",
		"models/trips_clean/v1.sql", "models/trips_daily/v1.sql"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		text := strings.ReplaceAll(string(data), "../../data/chain.duckdb", "chain.duckdb")
		text = strings.ReplaceAll(text, "../../fixtures/landing/", "landing/")
		text = strings.ReplaceAll(text, "../../fixtures/zones.csv", "zones.csv")
		if strings.HasSuffix(f, ".toml") {
			text += clitest.DuckdbSection
		}
		clitest.WriteFile(t, filepath.Join(dir, f), text)
	}
	clitest.WriteFile(t, filepath.Join(dir, "zones.csv"), "zone_id,zone,borough\n1,Airport,Queens\n2,Midtown,Manhattan\n3,Harlem,Manhattan\n")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "landing"), 0o755))
	return dir
}

// landingTrip is one row of a landing file.
type landingTrip struct {
	TripID    int64  `json:"trip_id"`
	Day       string `json:"pickup_day"`
	ZoneID    int64  `json:"zone_id"`
	Fare      string `json:"-"`
	UpdatedAt int64  `json:"updated_at"`
}

// writeLanding writes a landing file of n trips: new trips and new
// versions of earlier ones (updated_at one higher, so no ties), some with
// a fare that is not positive, some in zone 4 that zones does not know.
func writeLanding(t testing.TB, dir, name string, rng *rand.Rand, n int, latest map[int64]landingTrip) {
	t.Helper()
	var b strings.Builder
	for range n {
		var tr landingTrip
		if len(latest) > 0 && rng.IntN(4) == 0 {
			ids := make([]int64, 0, len(latest))
			for id := range latest {
				ids = append(ids, id)
			}
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			tr = latest[ids[rng.IntN(len(ids))]]
			tr.UpdatedAt++
		} else {
			tr = landingTrip{TripID: int64(len(latest) + 1), UpdatedAt: 1} // ids are 1..len(latest)
		}
		tr.Day = fmt.Sprintf("2026-01-%02d", 1+rng.IntN(3))
		tr.ZoneID = int64(1 + rng.IntN(4))
		cents := int64(rng.IntN(6000)) - 500
		tr.Fare = fmt.Sprintf("%d.%02d", cents/100, abs(cents%100))
		if cents < 0 && cents > -100 {
			tr.Fare = "-" + tr.Fare
		}
		if old, ok := latest[tr.TripID]; !ok || old.UpdatedAt < tr.UpdatedAt {
			latest[tr.TripID] = tr
		}
		fmt.Fprintf(&b, `{"trip_id": %d, "pickup_day": %q, "zone_id": %d, "fare": %s, "updated_at": %d}`+"\n", tr.TripID, tr.Day, tr.ZoneID, tr.Fare, tr.UpdatedAt)
	}
	clitest.WriteFile(t, filepath.Join(dir, "landing", name), b.String())
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// dailyFold is trips_daily computed in Go from the latest version of
// every trip: positive fares in a known zone, per day and zone the count
// and the sum of fares in cents, as "day zone trips fares".
func dailyFold(latest map[int64]landingTrip) []string {
	zones := map[int64]string{1: "Airport", 2: "Midtown", 3: "Harlem"}
	type agg struct{ n, cents int64 }
	by := map[string]*agg{}
	for _, tr := range latest {
		zone, ok := zones[tr.ZoneID]
		var whole, frac int64
		neg := strings.HasPrefix(tr.Fare, "-")
		fmt.Sscanf(strings.TrimPrefix(tr.Fare, "-"), "%d.%d", &whole, &frac)
		cents := whole*100 + frac
		if neg {
			cents = -cents
		}
		if !ok || cents <= 0 {
			continue
		}
		k := tr.Day + " " + zone
		if by[k] == nil {
			by[k] = &agg{}
		}
		by[k].n++
		by[k].cents += cents
	}
	var out []string
	for k, a := range by {
		out = append(out, fmt.Sprintf("%s %d %d.%02d", k, a.n, a.cents/100, a.cents%100))
	}
	sort.Strings(out)
	return out
}

// projectRun is one job's object in `idem run DIR --json`.
type projectRun struct {
	Job       string   `json:"job"`
	Decision  string   `json:"decision"`
	Changed   []string `json:"changed"`
	Snapshot  int64    `json:"snapshot"`
	BlockedBy []string `json:"blocked_by"`
	Runs      []struct {
		Decision string `json:"decision"`
	} `json:"runs"`
	Upstream []struct {
		Job  string `json:"job"`
		From *int64 `json:"from"`
		To   int64  `json:"to"`
	} `json:"upstream"`
}

// runProject runs `idem run --json ARGS` in-process; "." in args is the
// project folder dir.
func runProject(t *testing.T, dir string, args ...string) []projectRun {
	t.Helper()
	args = append([]string{"run", "--json"}, args...)
	for i, a := range args {
		if a == "." {
			args[i] = dir
		}
	}
	r := clitest.CallIdem(t, args...)
	require.Equal(t, 0, r.Code, "stdout %s\nstderr %s", r.Stdout, r.Stderr)
	var out []projectRun
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out), r.Stdout)
	return out
}

func decisionsOf(runs []projectRun) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.Job+" "+r.Decision)
	}
	return out
}

// TestChainProject: idem run DIR runs the chain in dependency order; again
// it commits nothing; a new landing file applies trips and rebuilds the
// models, and trips_daily equals a fold in Go over every landing file;
// rerun (and rerun --deep) of trips_daily's latest snapshot reproduces its
// sha256; --select trips_clean+ runs two jobs.
func TestChainProject(t *testing.T) {
	t.Parallel()
	dir := chainProject(t)
	db := filepath.Join(dir, "chain.duckdb")
	rng := rand.New(rand.NewPCG(15, 1))
	latest := map[int64]landingTrip{}
	writeLanding(t, dir, "2026-01-01.jsonl", rng, 40, latest)
	writeLanding(t, dir, "2026-01-02.jsonl", rng, 40, latest)

	runs := runProject(t, dir, ".")
	require.Equal(t, []string{"trips applied", "zones applied", "trips_clean loaded", "trips_daily loaded"}, decisionsOf(runs))
	require.Len(t, runs[0].Runs, 2)
	daily := func() []string {
		return clitest.QueryStrs(t, db, `SELECT strftime(pickup_day, '%Y-%m-%d') || ' ' || zone || ' ' || trips || ' ' || fares FROM trips_daily ORDER BY pickup_day, zone`)
	}
	require.Equal(t, dailyFold(latest), daily())

	runs = runProject(t, dir, ".")
	require.Equal(t, []string{"trips skipped", "zones already_committed", "trips_clean skipped", "trips_daily skipped"}, decisionsOf(runs))

	writeLanding(t, dir, "2026-01-03.jsonl", rng, 40, latest)
	runs = runProject(t, dir, ".")
	require.Equal(t, []string{"trips applied", "zones already_committed", "trips_clean loaded", "trips_daily loaded"}, decisionsOf(runs))
	require.Equal(t, []string{"input"}, runs[2].Changed)
	require.Len(t, runs[2].Upstream, 2)
	require.Equal(t, "trips", runs[2].Upstream[0].Job)
	require.Equal(t, int64(2), *runs[2].Upstream[0].From)
	require.Equal(t, int64(3), runs[2].Upstream[0].To)
	require.Equal(t, dailyFold(latest), daily())

	// The human output names the upstream that advanced.
	r := clitest.RunCLI(t, dir, "", "plan", ".")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "trips_daily")

	for _, deep := range []bool{false, true} {
		args := []string{"rerun", "trips_daily.toml", "--json"} // in dir
		if deep {
			args = append(args, "--deep")
		}
		r := clitest.CallIdem(t, append([]string{"rerun", filepath.Join(dir, "trips_daily.toml")}, args[2:]...)...)
		require.Equal(t, 0, r.Code, "deep=%v: %s %s", deep, r.Stdout, r.Stderr)
		var rr struct {
			Reproduced bool   `json:"reproduced"`
			SHA256     string `json:"sha256"`
			Rebuilt    string `json:"rebuilt_sha256"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &rr), r.Stdout)
		require.True(t, rr.Reproduced, r.Stdout)
		require.Equal(t, rr.SHA256, rr.Rebuilt)
	}

	runs = runProject(t, dir, ".", "--select", "trips_clean+")
	require.Equal(t, []string{"trips_clean skipped", "trips_daily skipped"}, decisionsOf(runs))
}

// TestUpstreamCommitsBetweenPlanAndRun: a plan pins the upstream's
// snapshot it sees; when the upstream commits before the run, the run
// pins the later snapshot and says so (human and JSON).
func TestUpstreamCommitsBetweenPlanAndRun(t *testing.T) {
	t.Parallel()
	dir := chainProject(t)
	rng := rand.New(rand.NewPCG(16, 1))
	latest := map[int64]landingTrip{}
	writeLanding(t, dir, "2026-01-01.jsonl", rng, 20, latest)
	runProject(t, dir, ".")

	writeLanding(t, dir, "2026-01-02.jsonl", rng, 20, latest)
	r := clitest.RunCLI(t, dir, "", "plan", "trips_clean.toml", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var plan projectRun
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &plan))
	require.Equal(t, "skipped", plan.Decision, "trips has not committed the new file yet")
	require.Equal(t, int64(1), plan.Upstream[0].To)

	// trips commits between the plan and the run.
	r = clitest.RunCLI(t, dir, "", "run", "trips.toml")
	require.Equal(t, 0, r.Code, r.Stderr)

	r = clitest.RunCLI(t, dir, "", "run", "trips_clean.toml")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "trips_clean: loaded [input changed]")
	require.Contains(t, r.Stdout, "upstream  trips 1 → 2, zones 1")
	r = clitest.RunCLI(t, dir, "", "run", "trips_clean.toml", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var res projectRun
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
	require.Equal(t, "skipped", res.Decision)
	require.Equal(t, int64(2), res.Upstream[0].To)
	require.Equal(t, int64(2), *res.Upstream[0].From)
}

// TestKillProject: a project run killed at a fault point (in the first
// job, or in a model's step) leaves every job committed or not, each
// whole; the next run finishes the chain, and trips_daily equals the fold.
// By default a kill before the first job's COMMIT, one in a model's step
// and the two after a COMMIT; IDEM_LONG=1 adds before_begin and
// after_target, which leave the database as before_commit does (the
// single-job kill test, crashtest TestKill, passes every fault point).
func TestKillProject(t *testing.T) {
	t.Parallel()
	points := []string{"after_step:01_model.sql", "before_commit", "after_commit", "checkpoint"}
	if clitest.LongTests() {
		points = append(points, "before_begin", "after_target")
	}
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			dir := chainProject(t)
			db := filepath.Join(dir, "chain.duckdb")
			rng := rand.New(rand.NewPCG(17, 1))
			latest := map[int64]landingTrip{}
			writeLanding(t, dir, "2026-01-01.jsonl", rng, 30, latest)
			writeLanding(t, dir, "2026-01-02.jsonl", rng, 30, latest)
			r := clitest.RunCLI(t, dir, point, "run", ".")
			require.True(t, r.Killed, "IDEM_FAULT=%s did not kill: %d %s %s", point, r.Code, r.Stdout, r.Stderr)

			r = clitest.CallIdem(t, "run", dir, "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			require.Equal(t, dailyFold(latest), clitest.QueryStrs(t, db, `SELECT strftime(pickup_day, '%Y-%m-%d') || ' ' || zone || ' ' || trips || ' ' || fares FROM trips_daily ORDER BY pickup_day, zone`))
			// Each job's state names the snapshot its target holds.
			for _, j := range []string{"trips", "zones", "trips_clean", "trips_daily"} {
				snaps := clitest.QueryInts(t, db, `SELECT snapshot FROM idem.jobs WHERE job = ?`, j)
				require.Len(t, snaps, 1, j)
				rows := clitest.QueryInts(t, db, `SELECT rows_out FROM idem.snapshots WHERE job = ? AND snapshot = ?`, j, snaps[0])
				n := clitest.QueryInts(t, db, `SELECT count(*) FROM `+j)
				require.Equal(t, rows, n, j)
			}
			runs := runProject(t, dir, ".")
			require.Equal(t, []string{"trips skipped", "zones already_committed", "trips_clean skipped", "trips_daily skipped"}, decisionsOf(runs))
		})
	}
}
