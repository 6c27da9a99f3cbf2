package cli

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newQueryCmd() *cobra.Command {
	var f dbFlags
	var format string
	var primary bool
	cmd := &cobra.Command{
		Use:   "query --db PATH SQL",
		Short: "Run one read-only SQL statement against a database",
		Long: `Run one read-only statement against a database opened read-only:
SELECT (FROM, WITH, VALUES, DESCRIBE, SHOW, SUMMARIZE, PRAGMA table_info)
or EXPLAIN. Nothing can write a database or a file, read a file, ATTACH,
INSTALL, LOAD or change a setting: such a statement fails with exit 1.
Values print as DuckDB's own CLI prints them (DATE 2001-01-01, TIME
10:00:00, DECIMAL exact). --format csv and json print every row; json is an
array of objects with numbers as numbers, booleans as booleans, SQL NULL as
null and every other value as a string. Add an ORDER BY over a key for
output that is the same bytes every time.

When another process holds the database for writing and the database has a
read replica ([duckdb] read_replica), query reads the replica at once: the
last committed state, named on stderr with the snapshots it holds.
--primary reads the database itself (failing with exit 4, or waiting with
--wait).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.db == "" {
				return a.fail(false, &report.UsageError{Msg: "query needs --db PATH"})
			}
			if f.jsonOut {
				format = "json"
			}
			if format != "table" && format != "csv" && format != "json" {
				return a.fail(false, &report.UsageError{Msg: fmt.Sprintf("--format must be table, csv or json, not %q", format)})
			}
			opts := f.options()
			if !primary {
				opts = append(opts, a.replicaOption())
			}
			rows, err := runner.Query(cmd.Context(), f.db, args[0], opts...)
			if err != nil {
				return a.fail(false, err)
			}
			return writeRows(a.stdout, rows, format)
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("db").Usage = "database file to read (required; query takes no job file)"
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, csv or json")
	cmd.Flags().BoolVar(&primary, "primary", false, "read the database itself, never its read replica, when a writer holds it")
	return cmd
}

func writeRows(w io.Writer, rows *runner.Rows, format string) error {
	switch format {
	case "csv":
		cw := csv.NewWriter(w)
		if err := cw.Write(rows.Columns); err != nil {
			return err
		}
		rec := make([]string, len(rows.Columns))
		for _, r := range rows.Values {
			for i, v := range r {
				rec[i] = textValue(v)
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	case "json":
		out := make([]json.RawMessage, 0, len(rows.Values))
		for _, r := range rows.Values {
			var b strings.Builder
			b.WriteByte('{')
			for i, v := range r {
				if i > 0 {
					b.WriteByte(',')
				}
				k, _ := json.Marshal(rows.Columns[i])
				b.Write(k)
				b.WriteByte(':')
				val, err := json.Marshal(jsonValue(v, rows.Kinds[i]))
				if err != nil {
					return err
				}
				b.Write(val)
			}
			b.WriteByte('}')
			out = append(out, json.RawMessage(b.String()))
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(out)
	default:
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(rows.Columns, "\t"))
		for _, r := range rows.Values {
			cells := make([]string, len(r))
			for i, v := range r {
				if v == nil {
					cells[i] = "NULL"
				} else {
					cells[i] = textValue(v)
				}
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "(%d rows)\n", len(rows.Values))
		return nil
	}
}

// textValue is a value of runner.Query: DuckDB's text, or nil for NULL.
func textValue(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// jsonValue writes a number as a JSON number, from DuckDB's exact text (a
// HUGEINT or a DECIMAL(38,10) keeps every digit), and a boolean as a JSON
// boolean. inf and nan are not JSON numbers and stay strings.
func jsonValue(v any, kind runner.Kind) any {
	if v == nil {
		return nil
	}
	s := textValue(v)
	switch kind {
	case runner.KindNumber:
		if s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) && json.Valid([]byte(s)) {
			return json.Number(s)
		}
	case runner.KindBool:
		if b, err := strconv.ParseBool(s); err == nil {
			return b
		}
	}
	return s
}
