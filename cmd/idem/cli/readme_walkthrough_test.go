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

// fence is a fenced block of the README: its language, the file it
// declares (```sql file=PATH), and its text.
var fence = regexp.MustCompile("(?s)```(\\w+)(?: file=(\\S+))?\\n(.*?)```")

// TestReadmeRefreshWalkthrough runs the README's "Write your own refresh
// pipeline" as written: it writes every file the section declares into an
// empty folder and runs every idem command of its sh block there, each of
// which must succeed and print what its comment says.
func TestReadmeRefreshWalkthrough(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	require.NoError(t, err)
	text := string(data)
	start := strings.Index(text, "### Write your own refresh pipeline")
	require.GreaterOrEqual(t, start, 0, "README has no refresh walk-through")
	section := text[start:]
	if end := strings.Index(section, "\n## "); end > 0 {
		section = section[:end]
	}

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

// shellWords splits a README command line into words (double quotes group
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
