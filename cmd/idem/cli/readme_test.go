package cli

import (
	"bytes"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// The README's CLI table is generated from the cobra commands, so that a
// flag added, renamed or described differently cannot drift from it.
// `go test ./cmd/idem/cli -run TestREADMECLITable -update` rewrites it.

const (
	cliTableStart = "<!-- cli-table: generated from the cobra commands by TestREADMECLITable; go test ./cmd/idem/cli -run TestREADMECLITable -update -->"
	cliTableEnd   = "<!-- cli-table end -->"
)

// readmeCommandOrder is the order of the table's rows; a command not named
// here is listed after them, by name, so a new command appears at once.
var readmeCommandOrder = []string{"run", "plan", "query", "log", "fence", "export", "diff", "rerun", "erase", "rollback", "lint", "test", "init", "show", "expire", "du", "compact", "backup", "docs", "version"}

// flagPlaceholders names a flag's value in the table; other flags show the
// name from their usage text (`NAME` in backquotes) or their type.
var flagPlaceholders = map[string]string{
	"db": "PATH", "input": "PATH", "out": "PATH", "temp-directory": "DIR",
	"wait": "D", "memory-limit": "SIZE", "threads": "N",
	"batch-id": "ID", "from": "A", "to": "B", "epoch": "E", "expect-parent": "P",
	"snapshot": "S", "to-snapshot": "S", "key": "K", "table": "T",
	"partition-by": "COL", "pipeline": "NAME", "mode": "MODE", "format": "F",
}

func TestREADMECLITable(t *testing.T) {
	table := cliTable((&app{}).newRootCmd())
	data, err := os.ReadFile("../../../README.md")
	require.NoError(t, err)
	start := bytes.Index(data, []byte(cliTableStart))
	end := bytes.Index(data, []byte(cliTableEnd))
	require.True(t, start >= 0 && end > start, "README.md must hold the CLI table between the markers %q and %q", cliTableStart, cliTableEnd)
	body := start + len(cliTableStart) + 1
	if *clitest.UpdateSnapshotGolden {
		out := append(append(append([]byte{}, data[:body]...), table...), data[end:]...)
		require.NoError(t, os.WriteFile("../../../README.md", out, 0o644))
		return
	}
	require.Equal(t, table, string(data[body:end]),
		"the README's CLI table differs from the cobra commands; rewrite it with go test ./cmd/idem/cli -run TestREADMECLITable -update")
}

// cliTable renders one row per command: its usage line, every flag not
// already in that line, and its short description.
func cliTable(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("| command | flags | what it does |\n| --- | --- | --- |\n")
	for _, cmd := range orderedCommands(root) {
		var flags []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" || strings.Contains(cmd.Use, "--"+f.Name+" ") || strings.HasSuffix(cmd.Use, "--"+f.Name) {
				return
			}
			flags = append(flags, "`"+flagText(f)+"`")
		})
		b.WriteString("| `idem " + cellText(cmd.Use) + "` | " + strings.Join(flags, " ") + " | " + cellText(cmd.Short) + " |\n")
	}
	return b.String()
}

func orderedCommands(root *cobra.Command) []*cobra.Command {
	byName := map[string]*cobra.Command{}
	var rest []string
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		byName[c.Name()] = c
		rest = append(rest, c.Name())
	}
	var out []*cobra.Command
	for _, name := range readmeCommandOrder {
		if c, ok := byName[name]; ok {
			out = append(out, c)
			delete(byName, name)
		}
	}
	sort.Strings(rest)
	for _, name := range rest {
		if c, ok := byName[name]; ok {
			out = append(out, c)
		}
	}
	return out
}

func flagText(f *pflag.Flag) string {
	name := "--" + f.Name
	if f.Value.Type() == "bool" {
		return "[" + name + "]"
	}
	value := flagPlaceholders[f.Name]
	if value == "" {
		v, _ := pflag.UnquoteUsage(f)
		value = strings.ToUpper(v)
	}
	return "[" + name + " " + value + "]"
}

// cellText escapes what would end a Markdown table cell.
func cellText(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
