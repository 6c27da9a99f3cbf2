package jobfs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTooDeep: the nesting of [ and { is counted outside strings and
// comments, and the line where it passes the bound is named.
func TestTooDeep(t *testing.T) {
	t.Parallel()
	open := func(s string, n int) string { return strings.Repeat(s, n) }
	cases := []struct {
		name string
		toml string
		want int // the line, 0 within the bound
	}{
		{"flat", "name = \"x\"\n[input]\npath = \"a.csv\"\n[[quality.rules]]\nname = \"r\"\n", 0},
		{"arrays at the bound", "a = " + open("[", 4) + "1" + open("]", 4), 0},
		{"arrays past the bound", "x = 1\n\na = " + open("[", 5) + "1" + open("]", 5), 3},
		{"inline tables past the bound", "a = " + open("{b = ", 5) + "1" + open("}", 5), 1},
		{"mixed past the bound", "a = [{b = [{c = [1]}]}]\n", 1},
		{"closed levels do not count", "a = [[[1]]]\nb = [[[2]]]\nc = [[[[[3]]]]]\n", 3},
		{"table header", "[a]\nb = [[[1]]]\n", 0},
		{"array of tables header", "[[a]]\nb = [[1]]\n", 0},
		{"basic string", `a = "` + open("[", 40) + `"`, 0},
		{"escaped quote in a basic string", `a = "\"` + open("[", 40) + `"`, 0},
		{"escaped backslash ends a basic string", `a = "\\"` + "\nb = " + open("[", 5), 2},
		{"literal string", "a = '" + open("{", 40) + "'", 0},
		{"literal string has no escapes", `a = '\'` + "\nb = " + open("[", 5), 2},
		{"multi-line basic string", "a = \"\"\"\n" + open("[", 40) + "\n\"\"\"\nb = " + open("[", 5), 4},
		{"multi-line basic string with quotes inside", "a = \"\"\"\"x\"\" " + open("[", 40) + "\"\"\"\"\nb = " + open("[", 5), 2},
		{"multi-line basic string line-ending backslash", "a = \"\"\"x \\\n" + open("[", 40) + "\"\"\"\nb = " + open("[", 5), 3},
		{"multi-line literal string", "a = '''\n" + open("{", 40) + "\n'''\nb = " + open("[", 5), 4},
		{"comment", "# " + open("[", 40) + "\na = 1 # " + open("{", 40) + "\nb = " + open("[", 5), 3},
		{"unterminated string ends at its line", "a = \"" + open("[", 40) + "\nb = " + open("[", 5), 2},
		{"crlf", "a = 1\r\n\r\nb = " + open("[", 5) + "\r\n", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, tooDeep([]byte(c.toml), 4))
		})
	}
}
