package docs

import (
	"crypto/sha256"
	"encoding/base64"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
)

// chain is a site of five jobs: a and b feed c, c feeds d, e stands
// alone and reads x, an upstream outside the project.
func chain() *Site {
	mk := func(name string, up ...string) *Job {
		j := &Job{ID: "job-" + name, Name: name, Database: "data/p.duckdb", Status: StatusOK, Snapshot: 1}
		for _, u := range up {
			id := "job-" + u
			if u == "x" {
				id = ""
			}
			j.Upstream = append(j.Upstream, Ref{Name: u, ID: id})
		}
		return j
	}
	return &Site{Title: "p", Jobs: []*Job{mk("a"), mk("b"), mk("e", "x"), mk("c", "a", "b"), mk("d", "c")}}
}

func TestLayout(t *testing.T) {
	t.Parallel()
	s := chain()
	g := Layout(s)
	require.Equal(t, g, Layout(chain()), "the same site gives the same layout")

	nodes := map[string]Node{}
	for _, n := range g.Nodes {
		nodes[n.Name] = n
	}
	require.Len(t, nodes, 6, "a box per job and one for the upstream outside the project")
	require.Equal(t, "", nodes["x"].ID, "an outside upstream links nowhere")
	for _, j := range s.Jobs {
		require.Equal(t, j.ID, nodes[j.Name].ID)
	}
	want := map[string]int{"a": 0, "b": 0, "x": 0, "e": 1, "c": 1, "d": 2}
	for name, level := range want {
		require.Equal(t, level, nodes[name].Level, name)
	}
	require.Len(t, g.Edges, 4)
	for _, e := range g.Edges {
		from, to := nodes[e.From], nodes[e.To]
		require.Less(t, from.X+from.W, to.X, "%s → %s runs left to right", e.From, e.To)
		require.True(t, strings.HasPrefix(e.D, "M"), e.D)
	}
	// No two boxes overlap, and every box is inside the drawing.
	for i, a := range g.Nodes {
		require.True(t, a.X >= 0 && a.Y >= 0 && a.X+a.W <= g.Width && a.Y+a.H <= g.Height, "%s inside %dx%d", a.Name, g.Width, g.Height)
		for _, b := range g.Nodes[i+1:] {
			apart := a.X+a.W <= b.X || b.X+b.W <= a.X || a.Y+a.H <= b.Y || b.Y+b.H <= a.Y
			require.True(t, apart, "%s and %s overlap", a.Name, b.Name)
		}
	}
	// A long name widens its box to hold it.
	s.Jobs[4].Name = strings.Repeat("w", 60)
	g = Layout(s)
	for _, n := range g.Nodes {
		if n.ID == s.Jobs[4].ID {
			require.GreaterOrEqual(t, n.W, 60*charWidth)
		}
	}
}

// hostile is text that would be markup or script if it reached the page
// unescaped.
const hostile = `</p></code></pre><script>alert(1)</script><img src=x onerror=alert(2)>"'&`

func TestRenderEscapesEveryText(t *testing.T) {
	t.Parallel()
	s := chain()
	j := s.Jobs[3]
	j.Description, j.DescriptionFrom = hostile, "description"
	j.File, j.Database, j.Table = hostile, hostile, hostile
	j.Key = []string{hostile}
	j.Columns = []Column{{Name: hostile, Type: hostile, Key: true, Description: hostile}}
	j.InputColumns = []Column{{Name: hostile, Type: "VARCHAR", Description: hostile}}
	j.Model, j.ModelFile, j.ModelSQL = true, hostile, "SELECT 1 AS \""+hostile+"\""
	j.Audits = []Audit{{Name: "a", Kind: "sql", Severity: "warn", Check: hostile, Result: hostile, ResultClass: "warn"}}
	j.Snapshots = []Snapshot{{Snapshot: 1, Kind: "loaded", BatchID: hostile, Rows: "3", Hashes: []Hash{{Part: "p = " + hostile, Rows: "3", SHA256: "ab"}}}}
	j.Runs = []Run{{Time: "t", BatchID: hostile, Decision: "failed", Message: hostile, Outcomes: hostile, Changed: hostile}}
	j.LastFailure = &j.Runs[0]
	j.Upstream = append(j.Upstream, Ref{Name: hostile})
	s.Title = hostile

	page, err := Render(s)
	require.NoError(t, err)
	text := string(page)
	require.Equal(t, 1, strings.Count(text, "<script"), "the page's own script and no other")
	require.NotContains(t, text, "<img")
	require.NotContains(t, text, "alert(1)</script>")
	require.NotContains(t, text, "</pre><script")
	require.Contains(t, text, "&lt;script&gt;alert(1)&lt;/script&gt;", "the text is shown, escaped")
	require.Greater(t, strings.Count(text, "&lt;img src=x onerror=alert(2)&gt;"), 10, "every field is shown")
}

func TestRenderPolicyAllowsItsOwnScriptAndStyle(t *testing.T) {
	t.Parallel()
	page, err := Render(chain())
	require.NoError(t, err)
	again, err := Render(chain())
	require.NoError(t, err)
	require.Equal(t, page, again, "the same site gives the same bytes")
	text := string(page)
	require.True(t, strings.HasPrefix(text, Marker))

	csp := regexp.MustCompile(`http-equiv="Content-Security-Policy" content="([^"]*)"`).FindStringSubmatch(text)
	require.NotNil(t, csp)
	policy := html.UnescapeString(csp[1])
	for _, el := range []string{"script", "style"} {
		m := regexp.MustCompile(`(?s)<` + el + `>(.*?)</` + el + `>`).FindStringSubmatch(text)
		require.NotNil(t, m, el)
		sum := sha256.Sum256([]byte(m[1]))
		require.Contains(t, policy, el+"-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'", "the policy names the %s the page holds", el)
	}
	require.Contains(t, policy, "default-src 'none'", "nothing else loads")
	require.NotRegexp(t, `https?:`, text, "no link out")
}

func TestLeadingComment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ text, prefix, want string }{
		{"# Trips.\n# Two lines.\nname = \"x\"\n# not this\n", "#", "Trips.\nTwo lines."},
		{"\n\n#   indented kept\n#\n# after a blank\nname = 1", "#", "  indented kept\n\nafter a blank"},
		{"name = \"x\" # trailing\n", "#", ""},
		{"-- Per day.\nSELECT 1 -- no\n", "--", "Per day."},
		{"SELECT 1\n-- later\n", "--", ""},
		{"# a\r\n# b\r\nx = 1\r\n", "#", "a\nb"},
	} {
		require.Equal(t, c.want, leadingComment(c.text, c.prefix), "%q", c.text)
	}
}

func TestAuditResults(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msg := func(s string) *string { return &s }
	entry := func(decision string, snapshot int64, m *string) catalog.LogEntry {
		return catalog.LogEntry{Time: at, Decision: decision, Snapshot: snapshot, Message: m}
	}
	warnNote := "audit few_rows (row_count, warn) found 1 violation(s)"
	failMsg := "job j: audit uniq (unique) found 2 violation(s): id=1, idem_rows=2; nothing committed"
	for _, c := range []struct {
		name    string
		entries []catalog.LogEntry // newest first
		want    map[string]string  // audit -> class
	}{
		{"never run", nil, map[string]string{"uniq": "none", "few_rows": "none"}},
		{"one clean commit", []catalog.LogEntry{entry(report.DecisionLoaded, 1, nil)}, map[string]string{"uniq": "passed", "few_rows": "passed"}},
		{"a warn noted", []catalog.LogEntry{entry(report.DecisionLoaded, 2, msg("upstream realigned; "+warnNote))}, map[string]string{"uniq": "passed", "few_rows": "warn"}},
		{"an error audit failed the last run", []catalog.LogEntry{entry(report.DecisionFailed, 1, msg(failMsg)), entry(report.DecisionLoaded, 1, msg(warnNote))},
			map[string]string{"uniq": "failed", "few_rows": "warn"}},
		{"skips ran no audit", []catalog.LogEntry{entry(report.DecisionSkipped, 1, nil), entry(report.DecisionAlreadyCommitted, 1, nil), entry(report.DecisionApplied, 1, msg(warnNote))},
			map[string]string{"uniq": "passed", "few_rows": "warn"}},
		{"a failure before the audits", []catalog.LogEntry{entry(report.DecisionFailed, 1, msg("stage x.csv: no such file")), entry(report.DecisionLoaded, 1, nil)},
			map[string]string{"uniq": "passed", "few_rows": "passed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &Job{Audits: []Audit{{Name: "uniq", ResultClass: "none"}, {Name: "few_rows", ResultClass: "none"}}}
			auditResults(d, c.entries)
			got := map[string]string{}
			for _, a := range d.Audits {
				got[a.Name] = a.ResultClass
			}
			require.Equal(t, c.want, got)
			if c.want["uniq"] == "failed" {
				require.Contains(t, d.Audits[0].Result, failMsg, "the failed run's message")
			}
			if c.want["few_rows"] == "warn" {
				require.Equal(t, "snapshot "+map[bool]string{true: "2", false: "1"}[c.name == "a warn noted"]+": "+warnNote, d.Audits[1].Result)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	page := []byte(Marker + " -->\n<html></html>\n")
	for _, c := range []struct {
		name    string
		setup   func(t *testing.T, dir string) string // returns --out
		refused string                                // "" when written
	}{
		{"a new folder, parents too", func(t *testing.T, dir string) string { return filepath.Join(dir, "a", "site") }, ""},
		{"an empty folder", func(t *testing.T, dir string) string { return dir }, ""},
		{"an earlier site", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, IndexFile), Marker+" old -->")
			write(t, filepath.Join(dir, ".idem-docs-123.tmp"), "half")
			return dir
		}, ""},
		{"a file of the user's", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, IndexFile), Marker+" -->")
			write(t, filepath.Join(dir, "notes.txt"), "mine")
			return dir
		}, "holds files idem docs did not write (notes.txt)"},
		{"an index.html of the user's", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, IndexFile), "<!DOCTYPE html><p>mine</p>")
			return dir
		}, "(index.html)"},
		{"a folder of the user's", func(t *testing.T, dir string) string {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "img"), 0o755))
			return dir
		}, "(img)"},
		{"a file, not a folder", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "f"), "x")
			return filepath.Join(dir, "f")
		}, "is a file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			out := c.setup(t, root)
			before := tree(t, root)
			err := Write(out, page)
			if c.refused != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), c.refused)
				require.Equal(t, report.ExitUsage, report.ExitCode(err))
				require.Equal(t, before, tree(t, root), "nothing changed")
				return
			}
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(out, IndexFile))
			require.NoError(t, err)
			require.Equal(t, page, got)
			entries, err := os.ReadDir(out)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			require.Contains(t, names, IndexFile)
			for _, n := range names {
				require.False(t, strings.HasSuffix(n, ".tmp") && !strings.HasPrefix(n, ".idem-docs-123"), "no temporary file left: %s", n)
			}
		})
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

// tree maps every file under dir to its bytes.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = string(b)
		}
		return nil
	}))
	return out
}

// TestComputeHashes: the page computes a packet's pending sha256s only
// when there are some and their rows are within the bound; a packet whose
// run stored every sha256 (partitions) costs nothing.
func TestComputeHashes(t *testing.T) {
	t.Parallel()
	day := "47"
	pending := catalog.PacketEntry{Rows: 5}
	stored := catalog.PacketEntry{Partition: &day, Rows: 9, SHA256: "ab"}
	for _, c := range []struct {
		name    string
		entries []catalog.PacketEntry
		bound   int64
		want    bool
	}{
		{"pending within the bound", []catalog.PacketEntry{pending}, 5, true},
		{"pending over the bound", []catalog.PacketEntry{pending}, 4, false},
		{"all stored", []catalog.PacketEntry{stored, stored}, 1_000_000, false},
		{"pending beside stored, counted alone", []catalog.PacketEntry{stored, pending}, 5, true},
		{"no entries", nil, 1_000_000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, computeHashes(&catalog.Packet{Entries: c.entries}, c.bound))
		})
	}
}
