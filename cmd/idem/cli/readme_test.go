package cli

import (
	"bytes"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// docs/cli.md's command reference is generated from the live cobra tree,
// so that a command or flag added, renamed or described differently cannot
// drift from it. `go test ./cmd/idem/cli -run TestCLIReference -update`
// rewrites it.

const (
	cliRefStart = "<!-- cli-reference: generated from the cobra commands by TestCLIReference; go test ./cmd/idem/cli -run TestCLIReference -update -->"
	cliRefEnd   = "<!-- cli-reference end -->"
	cliRefFile  = "docs/cli.md"
)

// readmeCommandOrder is the order of the reference's commands; a command
// not named here is listed after them, by name, so a new command appears at
// once.
var readmeCommandOrder = []string{"run", "plan", "query", "log", "fence", "export", "diff", "rerun", "erase", "rollback", "lint", "test", "init", "show", "expire", "du", "compact", "backup", "docs", "version"}

// flagPlaceholders names a flag's value in the reference; other flags show
// the name from their usage text (`NAME` in backquotes) or their type.
var flagPlaceholders = map[string]string{
	"db": "PATH", "input": "PATH", "out": "PATH", "temp-directory": "DIR",
	"wait": "D", "memory-limit": "SIZE", "threads": "N",
	"batch-id": "ID", "from": "A", "to": "B", "epoch": "E", "expect-parent": "P",
	"snapshot": "S", "to-snapshot": "S", "key": "K", "table": "T",
	"partition-by": "COL", "pipeline": "NAME", "mode": "MODE", "format": "F",
}

func TestCLIReference(t *testing.T) {
	t.Parallel()
	ref := cliReference((&app{}).newRootCmd())
	path := repoPath(t, cliRefFile)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	start := bytes.Index(data, []byte(cliRefStart))
	end := bytes.Index(data, []byte(cliRefEnd))
	require.True(t, start >= 0 && end > start, "%s must hold the CLI reference between the markers %q and %q", cliRefFile, cliRefStart, cliRefEnd)
	body := start + len(cliRefStart) + 1
	if *clitest.UpdateSnapshotGolden {
		out := append(append(append([]byte{}, data[:body]...), ref...), data[end:]...)
		require.NoError(t, os.WriteFile(path, out, 0o644))
		return
	}
	require.Equal(t, ref, string(data[body:end]),
		"%s differs from the cobra commands; rewrite it with go test ./cmd/idem/cli -run TestCLIReference -update", cliRefFile)
}

// TestCLIReferenceNamesEveryFlag: the generator is not trusted blindly; the
// reference it writes holds a heading for every command and subcommand and
// a row for every visible flag of each, so a command or flag the generator
// skipped would fail here even right after -update.
func TestCLIReferenceNamesEveryFlag(t *testing.T) {
	t.Parallel()
	root := (&app{}).newRootCmd()
	ref := cliReference(root)
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		sec := refSection(t, ref, cmd)
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				require.Contains(t, sec, "`--"+f.Name, "%s: flag --%s", cmd.CommandPath(), f.Name)
			}
		})
		for _, c := range cmd.Commands() {
			if !c.Hidden && c.Name() != "help" {
				walk(c)
			}
		}
	}
	for _, c := range orderedCommands(root) {
		walk(c)
	}
	require.Contains(t, refSection(t, ref, findCmd(t, root, "run")), "`--json`")
	require.Contains(t, refSection(t, ref, findCmd(t, root, "env", "list")), "\nidem env list ")
}

func findCmd(t *testing.T, root *cobra.Command, args ...string) *cobra.Command {
	t.Helper()
	c, _, err := root.Find(args)
	require.NoError(t, err)
	return c
}

// refSection is the part of the reference under cmd's heading.
func refSection(t *testing.T, ref string, cmd *cobra.Command) string {
	t.Helper()
	head := "\n### " + cmd.CommandPath() + "\n"
	i := strings.Index(ref, head)
	require.GreaterOrEqual(t, i, 0, "a heading for %s", cmd.CommandPath())
	sec := ref[i+len(head):]
	if j := strings.Index(sec, "\n### "); j >= 0 {
		sec = sec[:j]
	}
	return sec
}

// cliReference renders the summary table (one row per command: its usage
// line, every flag not already in that line, its short description), then
// a section per command and subcommand: its usage, its help text and a
// table of its flags.
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString(cliTable(root))
	var section func(cmd *cobra.Command)
	section = func(cmd *cobra.Command) {
		b.WriteString("\n### " + cmd.CommandPath() + "\n\n")
		b.WriteString(cmd.Short + "\n\n")
		b.WriteString("```text\n" + cmd.UseLine() + "\n```\n")
		if long := strings.TrimSpace(cmd.Long); long != "" && long != cmd.Short {
			b.WriteString("\n```text\n" + long + "\n```\n")
		}
		var rows []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			name := "`" + strings.Trim(flagText(f), "[]") + "`"
			if f.Shorthand != "" {
				name = "`-" + f.Shorthand + "`, " + name
			}
			rows = append(rows, "| "+name+" | "+cellText(flagDefault(f))+" | "+cellText(f.Usage)+" |\n")
		})
		if len(rows) > 0 {
			b.WriteString("\n| flag | default | meaning |\n| --- | --- | --- |\n")
			for _, r := range rows {
				b.WriteString(r)
			}
		}
		var subs []*cobra.Command
		for _, c := range cmd.Commands() {
			if !c.Hidden && c.Name() != "help" {
				subs = append(subs, c)
			}
		}
		sort.Slice(subs, func(i, j int) bool { return subs[i].Name() < subs[j].Name() })
		for _, c := range subs {
			section(c)
		}
	}
	for _, cmd := range orderedCommands(root) {
		section(cmd)
	}
	return b.String()
}

// flagDefault is a flag's default as `--help` shows it, empty for a zero
// value.
func flagDefault(f *pflag.Flag) string {
	switch f.DefValue {
	case "", "false", "0", "0s", "[]":
		return ""
	}
	if f.Name == "jobs" && f.DefValue == strconv.Itoa(runtime.NumCPU()) {
		return "the cores" // the machine's, not the one that wrote the reference
	}
	return "`" + f.DefValue + "`"
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
		b.WriteString("| [`idem " + cellText(cmd.Use) + "`](#" + anchorOf("idem "+cmd.Name()) + ") | " + strings.Join(flags, " ") + " | " + cellText(cmd.Short) + " |\n")
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
func cellText(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
