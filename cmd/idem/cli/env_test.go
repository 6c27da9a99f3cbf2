package cli

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// envRows is the number of rows of the environment tests' source.
const envRows = 40000

// envAmount is the amount of row id of the environment tests' source: the
// CSV holds id, grp = id % 50, envAmount(id); an independent computation
// of each model below starts from it.
func envAmount(id int) int { return (id * 7919) % 101 }

// writeEnvProject writes a three-job chain in one database: src
// (merge_by_key of a CSV of envRows rows) → mid (a one-file model) → top
// (a model over mid), and mid's SQL.
func writeEnvProject(t *testing.T, p *clitest.Project) {
	var b strings.Builder
	b.WriteString("id,grp,amount\n")
	for id := 1; id <= envRows; id++ {
		fmt.Fprintf(&b, "%d,%d,%d\n", id, id%50, envAmount(id))
	}
	p.Write("input/src.csv", b.String())
	p.Source("src", "p", "input/src.csv", "id = \"BIGINT\"\ngrp = \"INTEGER\"\namount = \"BIGINT\"", "id")
	p.FileModel("mid", "p", []string{"src"}, []string{"id"}, "SELECT id, grp, amount FROM {{upstream:src}} WHERE amount > 10\n")
	p.Model("top", "p", []string{"mid"}, []string{"grp"}, "", "SELECT grp, sum(amount) AS total, count(*) AS n FROM {{upstream:mid}} GROUP BY grp")
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type envDiffJSON struct {
	Job  string `json:"job"`
	From struct {
		Snapshot int64  `json:"snapshot"`
		SHA256   string `json:"sha256"`
		Rows     int64  `json:"rows"`
	} `json:"from"`
	To struct {
		Snapshot int64  `json:"snapshot"`
		SHA256   string `json:"sha256"`
		Rows     int64  `json:"rows"`
	} `json:"to"`
	Identical   bool     `json:"identical"`
	Added       int64    `json:"added"`
	Removed     int64    `json:"removed"`
	Changed     int64    `json:"changed"`
	ChangedKeys []string `json:"changed_keys"`
	Numeric     []struct {
		Column string `json:"column"`
		Sum    string `json:"sum"`
		MaxAbs string `json:"max_abs"`
	} `json:"numeric"`
}

func envDiff(t *testing.T, p *clitest.Project, name string) map[string]envDiffJSON {
	t.Helper()
	r := p.Idem("diff", p.Dir, "--env", name, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var diffs []envDiffJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &diffs), r.Stdout)
	out := map[string]envDiffJSON{}
	for _, d := range diffs {
		out[d.Job] = d
	}
	return out
}

// TestEnvironment: a three-job chain src → mid → top. mid's model is
// edited in place; run --env dev builds exactly mid and top, reading src
// from production without copying it (the environment's file is a
// fraction of production's and holds no src table), and production is
// byte-identical before and after. diff --env reports the rows an
// independent computation in Go expects (added, removed, changed, the sum
// and largest of the numeric differences). promote makes production hold
// the environment's bytes (sha256), rerun reproduces each promoted
// snapshot, and a second promote says already_promoted. An environment
// built before production moved is refused (exit 3) with production
// unchanged; env list, du and env drop see the environments.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	writeEnvProject(t, p)
	db := p.DB("p")
	require.Equal(t, 0, p.Idem("run", p.Dir).Code)

	// The edit: a higher threshold, amounts doubled.
	p.Write("models/mid.sql", "SELECT id, grp, amount * 2 AS amount FROM {{upstream:src}} WHERE amount > 20\n")

	r := p.Idem("plan", p.Dir, "--env", "dev", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var planned []struct {
		Jobs []struct {
			Job        string `json:"job"`
			Build      bool   `json:"build"`
			Production int64  `json:"production_snapshot"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &planned), r.Stdout)
	require.Len(t, planned, 1)
	var builds []string
	for _, j := range planned[0].Jobs {
		if j.Build {
			builds = append(builds, j.Job)
		}
		require.Equal(t, int64(1), j.Production, j.Job)
	}
	require.Equal(t, []string{"mid", "top"}, builds)

	prodState, prodSHA := clitest.DumpState(t, db), fileSHA(t, db)
	r = p.Idem("run", p.Dir, "--env", "dev")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "src: reads production's snapshot 1 (nothing of it changed)")
	require.Contains(t, r.Stdout, "mid: built in environment dev (transform changed)")
	require.Contains(t, r.Stdout, "top: built in environment dev (reads mid, built in the environment)")
	require.Equal(t, prodState, clitest.DumpState(t, db), "an environment's build wrote production")
	require.Equal(t, prodSHA, fileSHA(t, db), "production's file changed")

	envDB := filepath.Join(db+".envs", "dev.duckdb")
	envSize, prodSize := fileSize(t, envDB), fileSize(t, db)
	t.Logf("environment %d bytes, production %d bytes", envSize, prodSize)
	require.Less(t, envSize, prodSize, "the environment holds a copy of production")
	clitest.Inspect(t, envDB, func(conn *sql.Conn) {
		tables, err := clitest.QueryStrings(t.Context(), conn, "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY ALL")
		require.NoError(t, err)
		require.NotContains(t, tables, "src", "src was copied into the environment")
		require.Contains(t, tables, "mid")
		require.Contains(t, tables, "top")
	})

	// The independent computation.
	type agg struct{ total, n int64 }
	var removed, changed, sumDiff, maxDiff int64
	oldTop, newTop := map[int]agg{}, map[int]agg{}
	for id := 1; id <= envRows; id++ {
		a, g := int64(envAmount(id)), id%50
		if a > 10 {
			o := oldTop[g]
			oldTop[g] = agg{o.total + a, o.n + 1}
		}
		if a > 20 {
			o := newTop[g]
			newTop[g] = agg{o.total + 2*a, o.n + 1}
		}
		switch {
		case a > 20:
			changed++
			sumDiff += a
			maxDiff = max(maxDiff, a)
		case a > 10:
			removed++
		}
	}
	var topChanged int64
	for g := range oldTop {
		if oldTop[g] != newTop[g] {
			topChanged++
		}
	}
	diffs := envDiff(t, p, "dev")
	mid, top := diffs["mid"], diffs["top"]
	require.Equal(t, int64(0), mid.Added)
	require.Equal(t, removed, mid.Removed)
	require.Equal(t, changed, mid.Changed)
	require.Equal(t, int64(1), mid.From.Snapshot)
	require.Equal(t, int64(1), mid.To.Snapshot)
	require.Len(t, mid.Numeric, 2) // grp and amount; id is the key
	for _, n := range mid.Numeric {
		switch n.Column {
		case "grp":
			require.Equal(t, "0", n.Sum)
		case "amount":
			require.Equal(t, strconv.FormatInt(sumDiff, 10), n.Sum)
			require.Equal(t, strconv.FormatInt(maxDiff, 10), n.MaxAbs)
		default:
			t.Fatalf("numeric column %s", n.Column)
		}
	}
	require.Equal(t, topChanged, top.Changed)
	require.Equal(t, int64(0), top.Added+top.Removed)

	// A second environment, built now and made stale below.
	p.Write("models/mid.sql", "SELECT id, grp, amount * 3 AS amount FROM {{upstream:src}} WHERE amount > 20\n")
	require.Equal(t, 0, p.Idem("run", p.Dir, "--env", "stale").Code)
	p.Write("models/mid.sql", "SELECT id, grp, amount * 2 AS amount FROM {{upstream:src}} WHERE amount > 20\n")

	r = p.Idem("promote", p.Dir, "--env", "dev", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var promoted struct {
		Promoted []struct {
			Job      string `json:"job"`
			Decision string `json:"decision"`
			Snapshot int64  `json:"snapshot"`
			SHA256   string `json:"sha256"`
		} `json:"promoted"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &promoted), r.Stdout)
	require.Len(t, promoted.Promoted, 2)
	for i, name := range []string{"mid", "top"} {
		got := promoted.Promoted[i]
		require.Equal(t, name, got.Job)
		require.Equal(t, "promoted", got.Decision)
		require.Equal(t, int64(2), got.Snapshot)
		require.Equal(t, diffs[name].To.SHA256, got.SHA256, "%s: production's bytes are not the environment's", name)
	}
	for name, d := range envDiff(t, p, "dev") {
		require.True(t, d.Identical, "%s: production differs from the environment after promote", name)
		require.Equal(t, diffs[name].To.SHA256, d.From.SHA256, name)
	}
	for _, name := range []string{"mid", "top"} {
		r := p.Idem("rerun", p.Path(name+".toml"))
		require.Equal(t, 0, r.Code, "%s: %s %s", name, r.Stdout, r.Stderr)
		require.Contains(t, r.Stdout, "reproduced")
	}
	r = p.Idem("promote", p.Dir, "--env", "dev")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, 2, strings.Count(r.Stdout, "already promoted: snapshot 2"), r.Stdout)
	r = p.Idem("run", p.Dir)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, 2, strings.Count(r.Stdout, "skipped: nothing changed"), "a run after promote rebuilt a promoted job: %s", r.Stdout)

	// Production moved since "stale" was built: refused, nothing changed.
	before := clitest.DumpState(t, db)
	r = p.Idem("promote", p.Dir, "--env", "stale")
	require.Equal(t, 3, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stderr, "production moved since environment stale was built: its latest snapshot of mid is 2, the environment was built against 1")
	require.Equal(t, before, clitest.DumpState(t, db))

	// Production's src moves: diff --env says so, promote names it.
	p.Write("input/src-2.csv", fmt.Sprintf("id,grp,amount\n%d,1,99\n", envRows+1))
	require.Equal(t, 0, p.Idem("run", p.Path("src.toml"), "--input", p.Path("input/src-2.csv")).Code)
	r = p.Idem("diff", p.Dir, "--env", "stale", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"moved":["src 1 → 2"]`)
	r = p.Idem("promote", p.Dir, "--env", "stale")
	require.Equal(t, 3, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stderr, "production moved since environment stale was built: mid read upstream src at snapshot 1, production's latest is 2")
	// Once production expired what it read, the environment is refused.
	// Production's own readers hold what their kept snapshots' reruns read
	// (expire keeps it), so they move on and keep one snapshot first.
	for _, name := range []string{"mid", "top"} {
		require.Equal(t, 0, p.Idem("run", p.Path(name+".toml")).Code, name)
	}
	for _, name := range []string{"top", "mid", "src"} {
		r = p.Idem("expire", p.Path(name+".toml"), "--keep-snapshots", "1")
		require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	}
	for _, cmd := range [][]string{{"diff", p.Dir, "--env", "stale"}, {"promote", p.Dir, "--env", "stale"}} {
		r = p.Idem(cmd...)
		require.Equal(t, 3, r.Code, "%v: %s", cmd, r.Stdout+r.Stderr)
		require.Regexp(t, "(older than production's retention|production has expired snapshot 1)", r.Stderr)
	}

	r = p.Idem("env", "list", p.Dir)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "dev  ")
	require.Contains(t, r.Stdout, "stale  ")
	r = p.Idem("du", p.Path("mid.toml"))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "idem env drop stale removes it")
	require.Equal(t, 0, p.Idem("env", "drop", "stale", p.Dir).Code)
	r = p.Idem("promote", p.Dir, "--env", "stale")
	require.Equal(t, 2, r.Code)
	require.Contains(t, r.Stderr, "no environment stale")
	_, err := os.Stat(filepath.Join(db+".envs", "stale.duckdb"))
	require.True(t, os.IsNotExist(err))
	names, err := filepath.Glob(filepath.Join(db+".envs", "*"))
	require.NoError(t, err)
	slices.Sort(names)
	// dev.duckdb's verdict secret (run/verdicts.go) stays with it.
	require.Equal(t, []string{filepath.Join(db+".envs", "dev.duckdb"), filepath.Join(db+".envs", "dev.duckdb.verdicts-key"), filepath.Join(db+".envs", "dev.json")}, names)
}

// TestEnvironmentErase: an erasure in production drops the database's
// environments first, since what they built from production's rows may
// hold the subject; a dry run leaves them.
func TestEnvironmentErase(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("daily", "p", []string{"src"}, []string{"day"}, "", "SELECT day, sum(amount) AS amount FROM {{upstream:src}} GROUP BY day")
	require.Equal(t, 0, p.Idem("run", p.Dir).Code)
	p.NextModelVersion("daily", "SELECT day, sum(amount) AS amount, count(*) AS n FROM {{upstream:src}} GROUP BY day")
	r := p.Idem("run", p.Dir, "--env", "dev")
	require.Equal(t, 0, r.Code, r.Stderr)
	db := p.DB("p")
	r = p.Idem("erase", p.Path("src.toml"), "--key", "1", "--dry-run")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.FileExists(t, filepath.Join(db+".envs", "dev.duckdb"))
	r = p.Idem("erase", p.Path("src.toml"), "--key", "1")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "dropped environment(s) dev of "+db)
	_, err := os.Stat(db + ".envs")
	require.True(t, os.IsNotExist(err), "the environments' folder is still there")
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}

// TestPromoteTampered: promote copies a model's rows from the
// environment; --recompute runs its SELECT again in production and
// commits only equal bytes. An environment whose rows were changed behind
// idem's back is refused by promote --recompute (exit 3, production
// unchanged); a plain promote copies it, and rerun in production then
// says the snapshot does not reproduce.
func TestPromoteTampered(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("daily", "p", []string{"src"}, []string{"day"}, "", "SELECT day, sum(amount) AS amount FROM {{upstream:src}} GROUP BY day")
	require.Equal(t, 0, p.Idem("run", p.Dir).Code)
	p.NextModelVersion("daily", "SELECT day, sum(amount) AS amount, count(*) AS n FROM {{upstream:src}} GROUP BY day")
	require.Equal(t, 0, p.Idem("run", p.Dir, "--env", "dev").Code)
	db := p.DB("p")
	env, err := sql.Open("duckdb", filepath.Join(db+".envs", "dev.duckdb"))
	require.NoError(t, err)
	_, err = env.Exec("UPDATE daily SET n = n + 1 WHERE day = DATE '2024-01-01'")
	require.NoError(t, err)
	require.NoError(t, env.Close())

	before := clitest.DumpState(t, db)
	r := p.Idem("promote", p.Dir, "--env", "dev", "--recompute")
	require.Equal(t, 3, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stderr, "daily built in production gives sha256")
	require.Equal(t, before, clitest.DumpState(t, db), "a refused promote changed production")

	r = p.Idem("promote", p.Dir, "--env", "dev")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "daily: promoted: snapshot 2")
	r = p.Idem("rerun", p.Path("daily.toml"))
	require.NotEqual(t, 0, r.Code, "rerun reproduced a snapshot copied from a tampered environment: %s", r.Stdout)
	require.Contains(t, r.Stdout, "NOT reproduced")
}

// TestDuIceberg: idem du counts the files of a job's Iceberg table in its
// file:// warehouse (<warehouse>/<namespace>.db/<table>).
func TestDuIceberg(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	src, err := os.ReadFile(p.Path("src.toml"))
	require.NoError(t, err)
	p.Write("src.toml", string(src)+"\n[publish.iceberg]\ncatalog = \"lake/catalog.db\"\nwarehouse = \"lake/warehouse\"\nnamespace = \"analytics\"\n")
	r := p.Idem("run", p.Path("src.toml"))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "declares [publish.iceberg] but this idem binary does not publish")
	p.Write("lake/warehouse/analytics.db/src/data/part-1.parquet", strings.Repeat("x", 1000))
	p.Write("lake/warehouse/analytics.db/src/metadata/v1.metadata.json", strings.Repeat("y", 234))
	r = p.Idem("du", p.Path("src.toml"), "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var du struct {
		Iceberg struct {
			Location string `json:"location"`
			Bytes    int64  `json:"bytes"`
			Files    int    `json:"files"`
		} `json:"iceberg"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &du), r.Stdout)
	require.Equal(t, int64(1234), du.Iceberg.Bytes)
	require.Equal(t, 2, du.Iceberg.Files)
	require.Equal(t, p.Path("lake/warehouse/analytics.db/src"), du.Iceberg.Location)
}
