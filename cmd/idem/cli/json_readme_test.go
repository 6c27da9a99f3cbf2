package cli

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// jsonShape is one --json object as docs/cli.md documents it: its keys,
// and those left out when empty.
type jsonShape struct {
	keys, optional []string
	array          bool // an array of objects (query), not one object
}

// readmeJSONShapes parses docs/cli.md's "## JSON output" section: one bullet
// per shape, "- **name**: `key`, `key?`, ... — free text", a bullet that
// continues on indented lines. A bullet without a colon after its name
// documents an array.
func readmeJSONShapes(t *testing.T) map[string]jsonShape {
	t.Helper()
	section := docSection(t, "docs/cli.md", "## JSON output")
	var bullets []string
	for _, l := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(l, "- **"):
			bullets = append(bullets, l)
		case strings.HasPrefix(l, "  ") && len(bullets) > 0 && strings.TrimSpace(l) != "":
			bullets[len(bullets)-1] += " " + strings.TrimSpace(l)
		case strings.TrimSpace(l) == "" || !strings.HasPrefix(l, "  "):
			if len(bullets) > 0 && !strings.HasSuffix(bullets[len(bullets)-1], "\x00") {
				bullets[len(bullets)-1] += "\x00" // ends the bullet
			}
		}
	}
	head := regexp.MustCompile(`^- \*\*([^*]+)\*\*(:?)`)
	key := regexp.MustCompile("`([a-z0-9_]+)(\\??)`")
	shapes := map[string]jsonShape{}
	for _, bl := range bullets {
		bl = strings.TrimSuffix(bl, "\x00")
		m := head.FindStringSubmatch(bl)
		require.NotNil(t, m, "bullet %q", bl)
		var s jsonShape
		rest := bl[len(m[0]):]
		if m[2] == "" {
			s.array = true
		} else {
			if i := strings.Index(rest, " — "); i >= 0 {
				rest = rest[:i]
			}
			for _, k := range key.FindAllStringSubmatch(rest, -1) {
				s.keys = append(s.keys, k[1])
				if k[2] == "?" {
					s.optional = append(s.optional, k[1])
				}
			}
			require.NotEmpty(t, s.keys, "bullet %q lists no keys", bl)
		}
		require.NotContains(t, shapes, m[1], "docs/cli.md documents %s twice", m[1])
		shapes[m[1]] = s
	}
	return shapes
}

// TestJSONShapesMatchTheDocs runs every command with --json and checks
// that its top-level keys are exactly those docs/cli.md's "JSON output"
// section lists for it (a key marked ? may be left out), and that every
// command of the CLI is documented there.
func TestJSONShapesMatchTheDocs(t *testing.T) {
	t.Parallel()
	shapes := readmeJSONShapes(t)

	// Every command of the CLI has at least one documented shape.
	for _, c := range (&app{}).newRootCmd().Commands() {
		found := false
		for name := range shapes {
			if name == c.Name() || strings.HasPrefix(name, c.Name()+" (") {
				found = true
			}
		}
		require.True(t, found, "docs/cli.md's JSON output does not document %s", c.Name())
	}

	j := clitest.NewGuardJob(t)
	out := func(args ...string) string {
		t.Helper()
		r := clitest.CallIdem(t, args...)
		require.Equal(t, 0, r.Code, "%v: %s", args, r.Stderr)
		return r.Stdout
	}
	outs := map[string]string{}
	outs["run"] = out("run", j.File, "--json")
	out("run", j.File, "--json", "--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
	outs["plan"] = out("plan", j.File, "--json")
	outs["query"] = out("query", "--db", j.DB, "--json", "SELECT entity_id, status FROM customer_state ORDER BY entity_id")
	outs["log"] = out("log", j.File, "--json")
	csv1, csv2 := filepath.Join(j.Dir, "s1.csv"), filepath.Join(j.Dir, "s2.csv")
	outs["export"] = out("export", j.File, "--json", "--snapshot", "1", "--out", csv1)
	out("export", j.File, "--json", "--out", csv2)
	outs["export (partitioned)"] = out("export", j.File, "--json", "--partition-by", "status", "--out", filepath.Join(j.Dir, "parts"))
	lake := filepath.Join(j.Dir, "lake")
	out("export", j.File, "--json", "--format", "parquet", "--partition-by", "status", "--out", lake)
	outs["show"] = out("show", j.File, "--json", "--snapshot", "2")
	outs["show (audit)"] = out("show", j.File, "--json", "--audit", "status = 'active'", "--export", lake)
	outs["diff (snapshots)"] = out("diff", j.File, "--json", "--from", "1", "--to", "2")
	outs["diff (files)"] = out("diff", "--json", csv1, csv2)
	outs["rerun"] = out("rerun", j.File, "--json")
	outs["rollback"] = out("rollback", j.File, "--json", "--to-snapshot", "1")
	outs["erase"] = out("erase", j.File, "--json", "--key", "account-1")
	outs["compact"] = out("compact", "--db", j.DB, "--json")
	outs["backup"] = out("backup", "--db", j.DB, "--out", filepath.Join(j.Dir, "backup"), "--json")
	outs["fence"] = out("fence", j.File, "--json")
	outs["expire"] = out("expire", j.File, "--json", "--keep-snapshots", "1", "--dry-run")
	outs["du"] = out("du", j.File, "--json")
	outs["lint"] = out("lint", j.File, "--json")
	outs["test"] = out("test", filepath.Join(clitest.RepoRoot(t), "configs", "trips"), "--json")
	outs["init"] = out("init", filepath.Join(t.TempDir(), "proj"), "--json")
	outs["version"] = out("version", "--json")
	r := clitest.CallIdem(t, "run", j.File, "--json", "--input", filepath.Join(j.Dir, "missing.jsonl"))
	require.Equal(t, 1, r.Code)
	outs["error"] = r.Stdout

	files := t.TempDir()
	clitest.WriteFile(t, filepath.Join(files, "trips.toml"), filesJob(files, "per_file"))
	landing(t, files, "a.jsonl", 0, 3)
	outs["run (files mode)"] = out("run", filepath.Join(files, "trips.toml"), "--json")
	chunked := t.TempDir()
	makeParquet(t, filepath.Join(chunked, "big.parquet"), 100, 64)
	clitest.WriteFile(t, filepath.Join(chunked, "job.toml"), chunkJob(chunked, 50))
	outs["run (chunked)"] = out("run", filepath.Join(chunked, "job.toml"), "--json")
	k := clitest.StartKafka(t, 2)
	for i := range 6 {
		k.Produce(clitest.RideChange(i, 4, 2))
	}
	outs["run (stream)"] = out("run", k.JobFile(t.TempDir(), ""), "--json")

	// A project: a model (whose run and plan objects name their upstream
	// snapshots), a model that fails and one blocked by it.
	p := clitest.NewProject(t)
	p.Model("daily", "p", []string{"src"}, []string{"day"}, "", dailyModel)
	p.Model("broken", "p", []string{"src"}, []string{"day"}, "", "SELECT day, no_such_column FROM {{upstream:src}}\n")
	p.Model("after", "p", []string{"broken"}, []string{"day"}, "", "SELECT day FROM {{upstream:broken}}\n")
	r = clitest.CallIdem(t, "run", p.Dir, "--json")
	require.Equal(t, 1, r.Code, r.Stderr)
	outs["run (project)"] = r.Stdout
	objs := projectObjects(t, r.Stdout)
	elem := func(name string) string {
		b, err := json.Marshal(objs[name])
		require.NoError(t, err)
		return string(b)
	}
	outs["run (project, failed)"] = elem("broken")
	outs["run (project, blocked)"] = elem("after")
	outs["docs"] = out("docs", p.Dir, "--out", filepath.Join(t.TempDir(), "site"), "--json")
	// An environment: a model edited, built beside production, compared
	// and promoted.
	ep := clitest.NewProject(t)
	ep.Model("daily", "p", []string{"src"}, []string{"day"}, "", dailyModel)
	require.Equal(t, 0, clitest.CallIdem(t, "run", ep.Dir).Code)
	// The edit in place is refused (released SQL never changes), in the
	// environment as in production.
	ep.Write("models/daily/v1.sql", strings.Replace(dailyModel, "SELECT", "SELECT 1 AS one,", 1))
	r = clitest.CallIdem(t, "run", ep.Dir, "--env", "dev")
	require.Equal(t, 3, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "was edited after release")
	ep.Write("models/daily/v1.sql", dailyModel)
	ep.Write("models/daily/v2.sql", strings.Replace(dailyModel, "SELECT", "SELECT 1 AS one,", 1))
	daily, err := os.ReadFile(ep.Path("daily.toml"))
	require.NoError(t, err)
	ep.Write("daily.toml", strings.Replace(string(daily), "transform_version = 1", "transform_version = 2", 1))
	r = clitest.CallIdem(t, "run", ep.Dir, "--env", "dev")
	require.Equal(t, 0, r.Code, r.Stderr)
	outs["diff (environment)"] = out("diff", ep.Dir, "--env", "dev", "--json")
	outs["env"] = out("env", "list", ep.Dir, "--json")
	outs["promote"] = out("promote", ep.Dir, "--env", "dev", "--json")
	// Outputs of shapes already run above, checked the same way.
	also := []struct{ shape, stdout string }{
		{"run", elem("src")},
		{"run", elem("daily")},
		{"plan", out("plan", p.Path("daily.toml"), "--json")},
	}
	for _, a := range also[1:] {
		require.Contains(t, a.stdout, `"upstream":[{`, "a model's %s object names its upstream", a.shape)
	}

	require.Equal(t, slices.Sorted(maps.Keys(shapes)), slices.Sorted(maps.Keys(outs)), "docs/cli.md's JSON shapes and the shapes this test runs")

	check := func(name, stdout string) {
		t.Helper()
		s := shapes[name]
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stdout), "\n")+1, "%s prints one line of JSON: %s", name, stdout)
		if s.array {
			var rows []map[string]any
			require.NoError(t, json.Unmarshal([]byte(stdout), &rows), "%s: %s", name, stdout)
			return
		}
		var obj map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(stdout), &obj), "%s: %s", name, stdout)
		var got []string
		for k := range obj {
			got = append(got, k)
		}
		for _, k := range s.optional {
			if _, ok := obj[k]; !ok {
				got = append(got, k)
			}
		}
		sort.Strings(got)
		want := slices.Clone(s.keys)
		sort.Strings(want)
		require.Equal(t, want, got, "top-level keys of %s --json (docs/cli.md ## JSON output)", name)
	}
	for name, stdout := range outs {
		check(name, stdout)
	}
	for _, a := range also {
		check(a.shape, a.stdout)
	}
	// The element of runs in files and chunked mode is the single-run shape.
	for _, name := range []string{"run (files mode)", "run (chunked)"} {
		var many struct{ Runs []map[string]json.RawMessage }
		require.NoError(t, json.Unmarshal([]byte(outs[name]), &many))
		require.NotEmpty(t, many.Runs)
		var single map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(outs["run"]), &single))
		require.Equal(t, slices.Sorted(maps.Keys(single)), slices.Sorted(maps.Keys(many.Runs[0])), name)
	}
}
