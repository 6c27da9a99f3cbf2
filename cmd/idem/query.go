package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/runner"
)

func (a *app) newQueryCmd() *cobra.Command {
	var f dbFlags
	var format string
	cmd := &cobra.Command{
		Use:   "query --db PATH SQL",
		Short: "Run read-only SQL against a database",
		Long: `Run read-only SQL against a database opened read-only. --format csv
and json print every row; json is an array of objects with SQL NULL as null.
Add an ORDER BY over a key for output that is the same bytes every time.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.db == "" {
				return a.fail(false, &runner.UsageError{Msg: "query needs --db PATH"})
			}
			if f.jsonOut {
				format = "json"
			}
			if format != "table" && format != "csv" && format != "json" {
				return a.fail(false, &runner.UsageError{Msg: fmt.Sprintf("--format must be table, csv or json, not %q", format)})
			}
			rows, err := runner.Query(cmd.Context(), f.db, args[0], f.openOptions(nil))
			if err != nil {
				return a.fail(false, err)
			}
			return writeRows(a.stdout, rows, format)
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("db").Usage = "database file to read (required; query takes no job file)"
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, csv or json")
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
				val, err := json.Marshal(jsonValue(v))
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

func textValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	default:
		if b, err := json.Marshal(x); err == nil {
			if s, ok := x.(string); ok {
				return s
			}
			switch x.(type) {
			case map[string]any, []any:
				return string(b)
			}
		}
		return fmt.Sprint(x)
	}
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	default:
		return x
	}
}
