package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"html"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// docsDescription is the zones job's description: markup that the page
// must show as text.
const docsDescription = `Zones <script>alert("zones")</script><img src=x onerror=alert(2)> & "names"`

// docsProject is the trips chain of configs/trips/ with a description on
// zones, a warn audit on trips_daily that finds a violation, two landing
// files applied, and then a third that cannot be read: trips's last run
// failed (and blocked the models). It returns the project folder, named
// trips.
func docsProject(t *testing.T) string {
	t.Helper()
	// The page's title is the folder's name.
	dir := filepath.Join(t.TempDir(), "trips")
	require.NoError(t, os.Rename(chainProject(t), dir))
	zones := filepath.Join(dir, "zones.toml")
	text, err := os.ReadFile(zones)
	require.NoError(t, err)
	clitest.WriteFile(t, zones, "description = "+jsonString(t, docsDescription)+"\n"+string(text)+"\n[columns]\nborough = \"the New York borough\"\n")
	daily := filepath.Join(dir, "trips_daily.toml")
	text, err = os.ReadFile(daily)
	require.NoError(t, err)
	clitest.WriteFile(t, daily, string(text)+"\n[[audit]]\nname = \"few_days\"\nkind = \"row_count\"\nmax = 1\nseverity = \"warn\"\n\n[[audit]]\nkind = \"unique\"\ncolumns = [\"pickup_day\", \"zone\"]\n"+
		"\n[columns]\nfares = \"the sum of their fares, in dollars\"\n")
	// Column descriptions in the model's SELECT list; the job file's
	// description of fares wins over its comment.
	model := filepath.Join(dir, "models", "trips_daily", "v1.sql")
	text, err = os.ReadFile(model)
	require.NoError(t, err)
	commented := strings.Replace(string(text), "SELECT pickup_day, zone, count(*) AS trips, sum(fare) AS fares\n",
		"SELECT pickup_day,\n       zone,\n       count(*) AS trips,    -- clean trips picked up that day in the zone\n       sum(fare) AS fares    -- not shown: the job file says\n", 1)
	require.NotEqual(t, string(text), commented, "the model's SELECT list")
	clitest.WriteFile(t, model, commented)

	rng := rand.New(rand.NewPCG(28, 1))
	latest := map[int64]landingTrip{}
	writeLanding(t, dir, "2026-01-01.jsonl", rng, 30, latest)
	writeLanding(t, dir, "2026-01-02.jsonl", rng, 30, latest)
	r := clitest.CallIdem(t, "run", dir)
	require.Equal(t, 0, r.Code, r.Stderr)
	clitest.WriteFile(t, filepath.Join(dir, "landing", "2026-01-03.jsonl"), "{not json\n")
	r = clitest.CallIdem(t, "run", dir)
	require.Equal(t, 1, r.Code, r.Stderr)
	return dir
}

// jsonString is s as a JSON string, which TOML reads as a basic string.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

// TestDocsUsage: idem docs refuses bad arguments with exit 2 and a message
// that says what to give, and never writes into a folder of the user's.
func TestDocsUsage(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	file := p.Path("src.toml")
	notes := t.TempDir()
	clitest.WriteFile(t, filepath.Join(notes, "notes.txt"), "mine")
	empty := t.TempDir()
	other := t.TempDir()
	clitest.WriteFile(t, filepath.Join(other, "sqlfluff.toml"), "[sqlfluff]\ndialect = \"duckdb\"\n")
	bad := t.TempDir()
	clitest.WriteFile(t, filepath.Join(bad, "j.toml"), "name = \"j\"\npipeline = \"merge_by_key\"\ntransform_version = 1\nschema_version = 1\nbogus = 3\n")
	out := filepath.Join(t.TempDir(), "site")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no --out", []string{"docs", p.Dir}, "--out FOLDER is required"},
		{"no folder", []string{"docs", "--out", out}, "accepts 1 arg(s), received 0"},
		{"two folders", []string{"docs", p.Dir, empty, "--out", out}, "accepts 1 arg(s), received 2"},
		{"a missing folder", []string{"docs", filepath.Join(empty, "nope"), "--out", out}, "no such file or directory"},
		{"a job file, not a folder", []string{"docs", file, "--out", out}, "is not a folder: give a project folder of job files"},
		{"an empty folder", []string{"docs", empty, "--out", out}, "holds no job files (*.toml with pipeline = ...)"},
		{"no job file, only another tool's TOML", []string{"docs", other, "--out", out}, "holds no job files"},
		{"a bad job file", []string{"docs", bad, "--out", out}, "j.toml:5"},
		{"--out holds the user's files", []string{"docs", p.Dir, "--out", notes}, "holds files idem docs did not write (notes.txt)"},
		{"--out is a file", []string{"docs", p.Dir, "--out", file}, "is a file: give a folder for the site"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := clitest.CallIdem(t, c.args...)
			require.Equal(t, 2, r.Code, "stdout %s\nstderr %s", r.Stdout, r.Stderr)
			require.Contains(t, r.Stderr, c.want)
			_, err := os.Stat(out)
			require.True(t, os.IsNotExist(err), "nothing written")
		})
	}
	got, err := os.ReadFile(filepath.Join(notes, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "mine", string(got))
	entries, err := os.ReadDir(notes)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing added beside the user's file")

	r := clitest.CallIdem(t, "docs", p.Dir, "--json")
	require.Equal(t, 2, r.Code)
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &obj), r.Stdout)
	require.Equal(t, float64(2), obj["exit_code"])

	r = clitest.CallIdem(t, "docs", "--help")
	require.Equal(t, 0, r.Code)
	for _, s := range []string{"idem docs DIR --out FOLDER", "lineage graph", "not run yet", "description =", "read-only", "same bytes", "never deletes or overwrites your files", "--wait"} {
		require.Contains(t, r.Stdout, s)
	}
}

// TestDocsSite: the site of a project before any run shows every job from
// its job files, "not run yet", and creates no database; after runs it
// shows each job's columns, snapshots with the sha256 idem show prints, its
// audits' last results and the last failure, read without changing the
// database; the same project and databases give the same bytes, wherever
// the project lies; and the page works in a real browser.
func TestDocsSite(t *testing.T) {
	t.Parallel()

	t.Run("not run yet", func(t *testing.T) {
		t.Parallel()
		dir := chainProject(t)
		out := filepath.Join(t.TempDir(), "site")
		r := clitest.CallIdem(t, "docs", dir, "--out", out, "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		var res struct {
			Out, Index string
			Jobs       []string
			NotRun     []string `json:"not_run"`
			Bytes      int
			SHA256     string
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
		require.Equal(t, []string{"trips", "zones", "trips_clean", "trips_daily"}, res.Jobs, "run order")
		require.Equal(t, res.Jobs, res.NotRun)
		page := readSite(t, out)
		require.Len(t, page, res.Bytes)
		sum := sha256.Sum256([]byte(page))
		require.Equal(t, hex.EncodeToString(sum[:]), res.SHA256)
		for _, j := range res.Jobs {
			require.Contains(t, page, `id="job-`+j+`"`)
		}
		require.Contains(t, page, "not run yet: database chain.duckdb does not exist")
		require.Contains(t, page, "<td><code>zone_id</code></td><td><code>INTEGER</code></td>", "the input columns the job file declares")
		_, err := os.Stat(filepath.Join(dir, "chain.duckdb"))
		require.True(t, os.IsNotExist(err), "docs creates no database")
	})

	dir := docsProject(t)
	db := filepath.Join(dir, "chain.duckdb")
	before := fileSum(t, db)
	out := filepath.Join(t.TempDir(), "site")
	r := clitest.CallIdem(t, "docs", dir, "--out", out)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "wrote "+filepath.Join(out, "index.html")+": 4 job(s), 0 not run yet")
	require.Equal(t, before, fileSum(t, db), "the database is read, never written")
	page := readSite(t, out)

	t.Run("what the page shows", func(t *testing.T) {
		daily := section(t, page, "trips_daily")
		for _, col := range []string{"pickup_day", "zone", "trips", "fares"} {
			require.Contains(t, daily, "<td><code>"+col+"</code></td>")
		}
		require.Contains(t, daily, "-- Per pickup day and zone", "the model's SQL")
		require.Contains(t, daily, "<td><code>trips</code></td><td><code>BIGINT</code></td><td></td><td class=\"coldesc\">clean trips picked up that day in the zone</td>", "a column's description from the model's comment")
		require.Contains(t, daily, "<td class=\"coldesc\">the sum of their fares, in dollars</td>", "from the job file's [columns], over the model's comment")
		require.NotContains(t, daily, `<td class="coldesc">not shown`)
		require.Contains(t, section(t, page, "zones"), "<td><code>borough</code></td><td><code>VARCHAR</code></td><td></td><td class=\"coldesc\">the New York borough</td>")
		var show struct {
			Entries []struct{ SHA256 string }
		}
		r := clitest.CallIdem(t, "show", filepath.Join(dir, "trips_daily.toml"), "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &show))
		require.Len(t, show.Entries, 1)
		require.Contains(t, daily, show.Entries[0].SHA256, "the snapshot's sha256, as idem show prints it")
		require.Contains(t, daily, "snapshot 1: audit few_days (row_count, warn) found 1 violation(s)")
		require.Contains(t, daily, "snapshot 1: no violation noted", "the unique audit")
		require.Contains(t, daily, `<span class="badge warn">audit warning</span>`)

		trips := section(t, page, "trips")
		var log struct {
			Runs []struct{ Decision, Message string }
		}
		r = clitest.CallIdem(t, "log", filepath.Join(dir, "trips.toml"), "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &log))
		require.Equal(t, "failed", log.Runs[0].Decision)
		require.Contains(t, trips, "<h3>Last failed run</h3>")
		require.Contains(t, trips, html.EscapeString(log.Runs[0].Message), "the failed run's message")
		require.Contains(t, trips, `<span class="badge failed">last run failed</span>`)
		require.Contains(t, trips, "<code>2026-01-02.jsonl</code>", "the batches of its snapshots and runs")

		zones := section(t, page, "zones")
		require.Contains(t, zones, html.EscapeString(docsDescription))
		require.Equal(t, 1, strings.Count(page, "<script"), "only the page's own script")

		entries, err := os.ReadDir(out)
		require.NoError(t, err)
		require.Len(t, entries, 1, "the site is one file")
	})

	t.Run("the same bytes, wherever the project lies", func(t *testing.T) {
		again := filepath.Join(t.TempDir(), "site")
		r := clitest.CallIdem(t, "docs", dir, "--out", again)
		require.Equal(t, 0, r.Code, r.Stderr)
		require.Equal(t, page, readSite(t, again))

		moved := filepath.Join(t.TempDir(), filepath.Base(dir))
		clitest.CopyDir(t, dir, moved)
		r = clitest.CallIdem(t, "docs", moved, "--out", again)
		require.Equal(t, 0, r.Code, "an earlier site is written over: %s", r.Stderr)
		require.Equal(t, page, readSite(t, again))
	})

	t.Run("in a browser", func(t *testing.T) {
		browseSite(t, filepath.Join(out, "index.html"), []string{"trips", "zones", "trips_clean", "trips_daily"})
	})
}

func readSite(t *testing.T, out string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "index.html"))
	require.NoError(t, err)
	return string(b)
}

// section is the page's panel of job name.
func section(t *testing.T, page, name string) string {
	t.Helper()
	start := strings.Index(page, `<section class="job" id="job-`+name+`"`)
	require.GreaterOrEqual(t, start, 0, "a panel for %s", name)
	end := strings.Index(page[start:], "</section>")
	require.Greater(t, end, 0)
	return page[start : start+end]
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
