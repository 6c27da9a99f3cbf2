package cli

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func (a *app) newLogCmd() *cobra.Command {
	var f dbFlags
	cmd := &cobra.Command{
		Use:   "log JOB",
		Short: "Show a job's runs, newest first",
		Long: `Show a job's runs, newest first, in the order they were recorded: time
(UTC), batch id, decision, changed key parts (first_load for the job's
first commit), rows in, outcome counts, snapshot, cursor after the run,
writer epoch and, last, the reason of a run that wrote nothing. Every
invocation of run is listed, whatever the job's input mode: skipped,
already_committed (with the committed batch's snapshot and counts),
refused and failed runs (recorded after their rollback, with the reason);
and fenced, erased and rolled_back.

One run is one line: control characters in any column are printed
escaped (\n, \t, \x00), and on a terminal the reason is cut to the
terminal's width. --json keeps every text exactly as recorded.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, name, err := f.openOne(cmd.Context(), args[0])
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			entries, err := p.Log(cmd.Context(), name)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(map[string]any{"job": name, "runs": entries})
			}
			var buf bytes.Buffer
			if err := writeLogTable(&buf, entries); err != nil {
				return a.fail(f.jsonOut, err)
			}
			out := buf.String()
			if w := a.stdoutWidth(); w > 0 {
				out = cutLines(out, w)
			}
			_, err = fmt.Fprint(a.stdout, out)
			return err
		},
	}
	f.register(cmd)
	return cmd
}

// writeLogTable writes the human log table: one line per run, the reason
// last so that a long one widens nothing but its own line.
func writeLogTable(w *bytes.Buffer, entries []runner.LogEntry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tBATCH\tDECISION\tCHANGED\tROWS IN\tOUTCOMES\tSNAPSHOT\tCURSOR\tEPOCH\tREASON")
	for _, e := range entries {
		batch, rowsIn, reason := "-", "-", ""
		if e.BatchID != nil {
			batch = escapeCell(*e.BatchID)
		}
		if e.RowsIn != nil {
			rowsIn = fmt.Sprint(*e.RowsIn)
		}
		var oc []string
		for _, k := range slices.Sorted(maps.Keys(e.Outcomes)) {
			oc = append(oc, fmt.Sprintf("%s=%d", escapeCell(k), e.Outcomes[k]))
		}
		changed := make([]string, len(e.Changed))
		for i, c := range e.Changed {
			changed[i] = escapeCell(c)
		}
		if e.FirstLoad {
			changed = append(changed, "first_load")
		}
		if e.Message != nil {
			reason = escapeCell(*e.Message)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", e.Time.UTC().Format("2006-01-02 15:04:05"),
			batch, escapeCell(e.Decision), strings.Join(changed, ","), rowsIn, strings.Join(oc, " "), e.Snapshot, e.Cursor, e.Epoch, reason)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the log table: %w", err)
	}
	// tabwriter pads every cell but the last; a run without a reason ends
	// in padding.
	lines := strings.SplitAfter(w.String(), "\n")
	w.Reset()
	for _, l := range lines {
		if strings.HasSuffix(l, "\n") {
			w.WriteString(strings.TrimRight(strings.TrimSuffix(l, "\n"), " ") + "\n")
		} else {
			w.WriteString(l)
		}
	}
	return nil
}

// escapeCell makes s safe for one cell of a one-line-per-row table: a
// control character, a Unicode line or paragraph separator, any other
// character Go does not count as printable, and each byte of invalid
// UTF-8 is written as a Go escape (\n, \t, \x1b, \u2028); everything else,
// quotes and backslashes included, is kept as it is.
func escapeCell(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func unsafeRune(r rune) bool { return unicode.IsControl(r) || !strconv.IsPrint(r) }

// stdoutWidth is the terminal's width when stdout is a terminal, else 0.
func (a *app) stdoutWidth() int {
	f, ok := a.stdout.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	w, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return w
}

// cutLines cuts every line of s longer than width runes to width, the last
// kept rune replaced by an ellipsis.
func cutLines(s string, width int) string {
	if width < 2 {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if utf8.RuneCountInString(l) > width {
			r := []rune(l)
			lines[i] = string(r[:width-1]) + "…"
		}
	}
	return strings.Join(lines, "\n")
}
