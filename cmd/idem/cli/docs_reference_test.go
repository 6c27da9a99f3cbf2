package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/modeltest"
	"github.com/idem-dev/idem/pipelines"
)

// The documentation is README.md, ARCHITECTURE.md and docs/*.md. These
// tests check what of it the code can check without running a database:
// its links and anchors, that every idem command line in it is one the CLI
// parses, and that every job-file TOML in it holds only keys idem knows.
// The tour of the README and the walk-through of docs/pipelines.md run as
// written (readme_walkthrough_test.go); docs/cli.md's reference and JSON
// shapes are checked against the commands (readme_test.go,
// json_readme_test.go).

// docPage is one Markdown file of the documentation, by its path from the
// repository root.
type docPage struct{ path, text string }

func docPages(t *testing.T) []docPage {
	t.Helper()
	root := repoPath(t, "")
	names := []string{"README.md", "ARCHITECTURE.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, m := range more {
		names = append(names, "docs/"+filepath.Base(m))
	}
	var pages []docPage
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(n)))
		require.NoError(t, err)
		pages = append(pages, docPage{n, string(b)})
	}
	require.Greater(t, len(pages), 10)
	return pages
}

// docSection is the section of page (a path from the repository root)
// under heading (with its #s), up to the next level-2 heading.
func docSection(t *testing.T, page, heading string) string {
	t.Helper()
	b, err := os.ReadFile(repoPath(t, page))
	require.NoError(t, err)
	text := "\n" + string(b)
	start := strings.Index(text, "\n"+heading+"\n")
	require.GreaterOrEqual(t, start, 0, "%s has no heading %q", page, heading)
	section := text[start+1:]
	if end := strings.Index(section[len(heading):], "\n## "); end >= 0 {
		section = section[:len(heading)+end]
	}
	return section
}

// codeBlock is a fenced block: its language, the words after it on the
// fence line, and its text.
type codeBlock struct{ lang, info, text string }

var fenceLine = regexp.MustCompile("(?s)(?:^|\n)```(\\w*)([^\n]*)\n(.*?)\n```")

func codeBlocks(text string) []codeBlock {
	var out []codeBlock
	for _, m := range fenceLine.FindAllStringSubmatch(text, -1) {
		out = append(out, codeBlock{m[1], strings.TrimSpace(m[2]), m[3]})
	}
	return out
}

// prose is text with its fenced blocks and inline code blanked out.
func prose(text string) string {
	text = fenceLine.ReplaceAllString(text, "\n")
	return regexp.MustCompile("`[^`\n]*`").ReplaceAllString(text, "")
}

// anchorOf is the anchor GitHub gives a heading: lower case, punctuation
// other than - and _ dropped, spaces turned into -.
func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors of a page's headings (a repeated heading gets
// -1, -2, ... as on GitHub).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range strings.Split(fenceLine.ReplaceAllString(text, "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimLeft(l, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		a := anchorOf(strings.ReplaceAll(h, "`", ""))
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks: every relative link of the documentation names a file of
// the repository, and every #anchor a heading of its page.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	pages := docPages(t)
	byPath := map[string]map[string]bool{}
	for _, p := range pages {
		byPath[p.path] = anchors(p.text)
	}
	links := 0
	for _, p := range pages {
		for _, m := range mdLink.FindAllStringSubmatch(prose(p.text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			page := p.path
			if file != "" {
				page = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.path), file)))
				_, err := os.Stat(repoPath(t, page))
				require.NoError(t, err, "%s links to %s, which does not exist", p.path, target)
			}
			if anchor != "" {
				a, ok := byPath[page]
				require.True(t, ok, "%s links to an anchor of %s, which is no page of the documentation", p.path, target)
				require.True(t, a[anchor], "%s links to %s: %s has no heading with anchor #%s", p.path, target, page, anchor)
			}
		}
	}
	require.Greater(t, links, 30)
}

// commandLines are the idem command lines of a page's sh and console
// blocks ("idem ...", "go run ./cmd/idem ...", after a "$ " prompt), with
// the comment and any shell tail (a pipe, a redirection) cut off.
func commandLines(text string) []string {
	var out []string
	for _, b := range codeBlocks(text) {
		if b.lang != "sh" && b.lang != "console" {
			continue
		}
		for _, l := range strings.Split(b.text, "\n") {
			l = strings.TrimSpace(l)
			if b.lang == "console" {
				var ok bool
				if l, ok = strings.CutPrefix(l, "$ "); !ok {
					continue
				}
			}
			if rest, ok := strings.CutPrefix(l, "go run ./cmd/idem "); ok {
				l = "idem " + rest
			}
			if strings.HasPrefix(l, "idem ") {
				out = append(out, l)
			}
		}
	}
	return out
}

// TestDocsCommandLines: every idem command line of the documentation names
// a command of the CLI and only flags that command has, with a value where
// the flag takes one, as cobra parses them.
func TestDocsCommandLines(t *testing.T) {
	t.Parallel()
	n := 0
	for _, p := range docPages(t) {
		for _, line := range commandLines(p.text) {
			args, _ := shellWords(line)
			for i, a := range args {
				if a == "|" || a == ">" || a == "&&" || a == ";" {
					args = args[:i]
					break
				}
			}
			cmd, rest, err := (&app{}).newRootCmd().Find(args[1:])
			require.NoError(t, err, "%s: %s", p.path, line)
			require.NotEqual(t, "idem", cmd.Name(), "%s: %s names no command", p.path, line)
			require.NoError(t, cmd.ParseFlags(rest), "%s: %s", p.path, line)
			n++
		}
	}
	require.Greater(t, n, 30)
}

// TestDocsJobFileBlocks: every TOML block of the documentation decodes,
// and holds only keys idem knows: a job file or a part of one (a missing
// name and pipeline are supplied, and commented-out keys are read as keys),
// a test file of models, or a pipeline.toml (which the walk-through
// loads).
func TestDocsJobFileBlocks(t *testing.T) {
	t.Parallel()
	commented := regexp.MustCompile(`(?m)^# (\[|[a-z_]+ = )`)
	dir := t.TempDir()
	n := 0
	for _, p := range docPages(t) {
		for _, b := range codeBlocks(p.text) {
			if b.lang != "toml" {
				continue
			}
			n++
			var doc map[string]any
			_, err := toml.Decode(b.text, &doc)
			require.NoError(t, err, "%s: a TOML block that does not decode:\n%s", p.path, b.text)
			switch {
			case strings.HasSuffix(b.info, "pipeline.toml"):
				continue
			case strings.HasPrefix(b.text, "[[test]]"):
				_, err := modeltest.ParseFile("test.toml", []byte(b.text))
				require.NoError(t, err, "%s: a test file of models:\n%s", p.path, b.text)
				continue
			}
			text := commented.ReplaceAllString(b.text, "$1")
			md, err := toml.Decode(text, &map[string]any{})
			require.NoError(t, err, "%s: with its commented keys:\n%s", p.path, text)
			if !md.IsDefined("pipeline") {
				text = "pipeline = \"merge_by_key\"\n" + text
			}
			if !md.IsDefined("name") {
				text = "name = \"docs_block\"\n" + text
			}
			path := filepath.Join(dir, "job.toml")
			_, err = job.ParseJob(path, []byte(text), pipelines.FS)
			if err != nil {
				require.NotContains(t, err.Error(), "unknown key", "%s: a key idem does not know:\n%s", p.path, b.text)
			}
		}
	}
	require.Greater(t, n, 15)
}

// TestArchitecturePackages: ARCHITECTURE.md's table of packages lists
// exactly the packages of the module, as go list ./... names them: every
// listed package exists and none is missing.
func TestArchitecturePackages(t *testing.T) {
	t.Parallel()
	const module = "github.com/idem-dev/idem"
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "go list needs the go command")
	cmd := exec.Command(goCmd, "list", "./...")
	cmd.Dir = repoPath(t, "")
	out, err := cmd.Output()
	require.NoError(t, err, "go list ./...")
	var want []string
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		require.NotEmpty(t, rel, "the module's root holds no package")
		want = append(want, rel)
	}

	section := docSection(t, "ARCHITECTURE.md", "## Packages")
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	var got []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		got = append(got, m[1])
	}
	slices.Sort(want)
	slices.Sort(got)
	require.NotEmpty(t, got, "ARCHITECTURE.md's ## Packages has a table row per package")
	require.Equal(t, want, slices.Compact(slices.Clone(got)), "ARCHITECTURE.md's packages and go list ./... (left: go list)")
	require.Equal(t, got, slices.Compact(slices.Clone(got)), "a package listed twice")
}

// TestDocsGoBlocks: every Go block of the documentation is Go (as the body
// of a function, "{ ... }" read as an empty block), and every runner.Name
// it uses is declared by package runner.
func TestDocsGoBlocks(t *testing.T) {
	t.Parallel()
	declared := map[string]bool{}
	pkgs, err := parser.ParseDir(token.NewFileSet(), repoPath(t, "runner"), func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.SkipObjectResolution)
	require.NoError(t, err)
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							declared[s.Name.Name] = true
						case *ast.ValueSpec:
							for _, n := range s.Names {
								declared[n.Name] = true
							}
						}
					}
				case *ast.FuncDecl:
					if d.Recv == nil {
						declared[d.Name.Name] = true
					}
				}
			}
		}
	}
	require.Contains(t, declared, "Open")

	uses := 0
	for _, p := range docPages(t) {
		for _, b := range codeBlocks(p.text) {
			if b.lang != "go" {
				continue
			}
			src := "package docs\nfunc _() {\n" + strings.ReplaceAll(b.text, "{ ... }", "{}") + "\n}\n"
			f, err := parser.ParseFile(token.NewFileSet(), p.path, src, parser.SkipObjectResolution)
			require.NoError(t, err, "%s: a Go block that does not parse:\n%s", p.path, b.text)
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "runner" {
						require.True(t, declared[sel.Sel.Name], "%s: runner.%s is not declared by package runner", p.path, sel.Sel.Name)
						uses++
					}
				}
				return true
			})
		}
	}
	require.Greater(t, uses, 5)
}
