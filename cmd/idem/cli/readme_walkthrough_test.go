package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// fence is a fenced block of the documentation: its language, the file it
// declares (```sql file=PATH), and its text.
var fence = regexp.MustCompile("(?s)```(\\w+)(?: file=(\\S+))?\\n(.*?)```")

// TestReadmeRefreshWalkthrough runs docs/pipelines.md's "Write your own
// refresh pipeline" as written: it writes every file the section declares into an
// empty folder and runs every idem command of its sh block there, each of
// which must succeed and print what its comment says.
func TestReadmeRefreshWalkthrough(t *testing.T) {
	t.Parallel()
	section := docSection(t, "docs/pipelines.md", "### Write your own refresh pipeline")

	dir := t.TempDir()
	var files, commands int
	var sh []string
	for _, m := range fence.FindAllStringSubmatch(section, -1) {
		switch {
		case m[2] != "":
			clitest.WriteFile(t, filepath.Join(dir, filepath.FromSlash(m[2])), m[3])
			files++
		case m[1] == "sh":
			sh = append(sh, strings.Split(strings.TrimSpace(m[3]), "\n")...)
		}
	}
	require.GreaterOrEqual(t, files, 8, "the pipeline, its steps, the job and the input")
	for _, line := range sh {
		args, want := shellWords(line)
		require.NotEmpty(t, args, line)
		require.Equal(t, "idem", args[0], line)
		r := clitest.RunCLI(t, dir, "", args[1:]...)
		require.Equal(t, 0, r.Code, "%s\n%s%s", line, r.Stdout, r.Stderr)
		require.Contains(t, r.Stdout, want, line)
		commands++
	}
	require.GreaterOrEqual(t, commands, 3)
}

// shellWords splits a documented command line into words (double quotes group
// a word) and returns the text of its trailing # comment.
func shellWords(line string) ([]string, string) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
			inWord = true
		case quoted:
			cur.WriteRune(r)
		case r == '#' && !inWord:
			return words, strings.TrimSpace(line[i+1:])
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, ""
}

// TestReadmeTour runs the README's "A tour of one chain of jobs" as
// written, in a copy of the files it uses (configs/trips/, the landing
// files, zones.csv): every command of its sh block must succeed and print
// what its comment says; cp and rm lines are done as the shell would.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	section := docSection(t, "README.md", "## A tour of one chain of jobs")
	var lines []string
	for _, m := range fence.FindAllStringSubmatch(section, -1) {
		if m[1] == "sh" {
			lines = append(lines, strings.Split(strings.TrimSpace(m[3]), "\n")...)
		}
	}

	dir := t.TempDir()
	root := repoPath(t, "")
	clitest.CopyDir(t, filepath.Join(root, "configs", "trips"), filepath.Join(dir, "configs", "trips"))
	clitest.CopyDir(t, filepath.Join(root, "fixtures", "landing"), filepath.Join(dir, "fixtures", "landing"))
	clitest.CopyDir(t, filepath.Join(root, "fixtures", "landing-next"), filepath.Join(dir, "fixtures", "landing-next"))
	zones, err := os.ReadFile(filepath.Join(root, "fixtures", "zones.csv"))
	require.NoError(t, err)
	clitest.WriteFile(t, filepath.Join(dir, "fixtures", "zones.csv"), string(zones))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o755))

	var commands int
	for _, line := range lines {
		args, want := shellWords(line)
		require.NotEmpty(t, args, line)
		switch {
		case args[0] == "cp" && len(args) == 3:
			b, err := os.ReadFile(filepath.Join(dir, args[1]))
			require.NoError(t, err, line)
			clitest.WriteFile(t, filepath.Join(dir, args[2], filepath.Base(args[1])), string(b))
		case args[0] == "rm" && len(args) == 2:
			require.NoError(t, os.Remove(filepath.Join(dir, args[1])), line)
		default:
			require.Equal(t, []string{"go", "run", "./cmd/idem"}, args[:3], line)
			// In process, which is cheaper than a process per command: a
			// path of the tour is read from the copy.
			args = args[3:]
			if CommandHasFlag(args, "threads") {
				args = append(args, "--threads", clitest.TestThreads)
			}
			for i, a := range args {
				if strings.HasPrefix(a, "configs/") || strings.HasPrefix(a, "data/") {
					args[i] = filepath.Join(dir, filepath.FromSlash(a))
				}
			}
			r := clitest.CallIdem(t, args...)
			require.Equal(t, 0, r.Code, "%s\n%s%s", line, r.Stdout, r.Stderr)
			require.NotEmpty(t, want, "every command of the tour says what it prints: %s", line)
			require.Contains(t, r.Stdout, want, line)
			commands++
		}
	}
	require.GreaterOrEqual(t, commands, 8)
	_, err = os.Stat(filepath.Join(dir, "fixtures", "landing", "2026-01-03.jsonl"))
	require.True(t, os.IsNotExist(err), "the tour puts the example back")
}
