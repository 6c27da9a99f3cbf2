package job

import (
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/report"
)

// ColumnsTable is the job file's top-level table of column descriptions:
//
//	[columns]
//	fare = "the fare in dollars, tips excluded"
//
// They are for people (idem docs shows them beside each column) and, like
// description, no part of the job key: a description edited never reloads
// a job.
const ColumnsTable = "columns"

// ColumnDocs reads the job file's [columns] table: each column's
// description by column name, nil when the table is absent. A value that is
// not a non-empty string is a *JobFileError naming the file, the line and
// the key (exit 2).
func ColumnDocs(path string, data []byte) (map[string]string, error) {
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil, jobfs.TOMLError(path, data, err)
	}
	v, ok := doc[ColumnsTable]
	if !ok {
		return nil, nil
	}
	columns, ok := v.(map[string]any)
	if !ok {
		return nil, &report.JobFileError{File: path, Line: jobfs.KeyLine(data, ColumnsTable), Key: ColumnsTable,
			Msg: `is a table of column descriptions: [columns] then name = "what the column holds"`}
	}
	out := make(map[string]string, len(columns))
	for name, v := range columns {
		key := []string{ColumnsTable, name}
		s, ok := v.(string)
		switch {
		case !ok:
			return nil, &report.JobFileError{File: path, Line: jobfs.KeyLine(data, key...), Key: ColumnsTable + "." + name,
				Msg: `a column's description is a string: [columns] ` + name + ` = "what the column holds"`}
		case strings.TrimSpace(s) == "":
			return nil, &report.JobFileError{File: path, Line: jobfs.KeyLine(data, key...), Key: ColumnsTable + "." + name,
				Msg: "a column's description is empty: say what the column holds, or leave the column out"}
		}
		out[name] = strings.TrimSpace(s)
	}
	return out, nil
}
