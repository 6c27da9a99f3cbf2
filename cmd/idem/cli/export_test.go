package cli

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/export"
)

// Every value of the partition column, NULL and the string Hive names NULL
// with included, gets its own folder, whose name reads back as the value
// and stays within the file name limit; every manifest sha256 is the
// file's.
func TestExportPartitionNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 300)
	values := []*string{nil}
	for _, v := range []string{
		"__HIVE_DEFAULT_PARTITION__", "__HIVE_DEFAULT_PARTITION__x", "a/b", "/", "..", ".", "a=b", "=",
		"100%", "%41", "A", "a", "%", "%25", "line\nbreak", "line\r\nbreak", "", " ", "tab\there", "~", "a~b",
		"é", "e\u0301", "NULL", "null", "Null", "%4EULL", long + "1", long + "2", strings.Repeat("/", 200), strings.Repeat("%", 100) + "z",
	} {
		values = append(values, &v)
	}
	j := clitest.NewGuardJob(t)
	var lines []string
	for i, v := range values {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		op := "upsert"
		if v == nil {
			op = "delete" // a tombstone: its value is NULL
		}
		lines = append(lines, fmt.Sprintf(`{"change_id":"c-%03d","entity_id":"e-%03d","source_version":1,"operation":%q,"value":%s}`, i, i, op, b))
	}
	// Two rows for NULL and two for the NULL look-alike: the collision the
	// old names had (6 rows listed, 5 files written).
	lines = append(lines,
		`{"change_id":"c-900","entity_id":"e-900","source_version":1,"operation":"delete","value":null}`,
		`{"change_id":"c-901","entity_id":"e-901","source_version":1,"operation":"upsert","value":"__HIVE_DEFAULT_PARTITION__"}`)
	j.Apply("--input", j.Input("values.jsonl", lines...))

	for _, format := range []string{"csv", "parquet"} {
		t.Run(format, func(t *testing.T) {
			out := filepath.Join(j.Dir, "by-value-"+format)
			r := clitest.CallIdem(t, "export", j.File, "--out", out, "--partition-by", "value", "--format", format, "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			var res export.Result
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
			m := clitest.ReadManifest(t, out)
			require.Len(t, m.Files, len(values), "one partition per distinct value")
			require.Equal(t, int64(len(lines)), m.Rows)
			seen := map[string]bool{}
			for _, f := range m.Files {
				dir, file, ok := strings.Cut(f.Path, "/")
				require.True(t, ok)
				require.Equal(t, "data."+format, file)
				require.LessOrEqual(t, len(dir), 255, "folder name within the file name limit")
				require.True(t, strings.HasPrefix(dir, "value="), dir)
				key := "NULL"
				if f.Value != nil {
					key = "v:" + *f.Value
				}
				require.False(t, seen[key], "value %q listed twice", key)
				seen[key] = true
				name := strings.TrimPrefix(dir, "value=")
				switch {
				case f.Value == nil:
					require.Equal(t, "__HIVE_DEFAULT_PARTITION__", name)
					require.Equal(t, int64(2), f.Rows)
				case strings.Contains(name, "~"):
					require.Greater(t, len(*f.Value), 60, "only long values are cut")
				default:
					got, err := url.PathUnescape(name)
					require.NoError(t, err)
					require.Equal(t, *f.Value, got, "folder %s reads back as the value", dir)
				}
				if f.Value != nil && *f.Value == "__HIVE_DEFAULT_PARTITION__" {
					require.Equal(t, int64(2), f.Rows)
				}
			}
			require.Len(t, seen, len(values))
			// Each file holds its partition's rows: read it back through
			// DuckDB and compare the values.
			for _, f := range m.Files {
				reader := "read_csv(" + clitest.SQLQuote(filepath.Join(out, f.Path)) + ", header = true, all_varchar = true, hive_partitioning = false)"
				if format == "parquet" {
					reader = "read_parquet(" + clitest.SQLQuote(filepath.Join(out, f.Path)) + ", hive_partitioning = false)"
				}
				got := readFiles(t, "SELECT CAST(count(*) AS VARCHAR), CAST(count(DISTINCT coalesce(value, '<null>')) AS VARCHAR), any_value(coalesce(value, '<null>')) FROM "+reader)
				want := "<null>"
				if f.Value != nil {
					want = *f.Value
				}
				if format == "csv" && want == "" {
					want = "<null>" // csv writes '' and NULL alike; the folder tells them apart
				}
				require.Equal(t, [][]any{{fmt.Sprint(f.Rows), "1", want}}, got, "partition %s", f.Path)
			}
			// DuckDB's hive_partitioning reads every short folder name back
			// as its value, NULL as NULL. (A long value's folder name is
			// cut: such readers must take the value from the file.)
			if format == "parquet" {
				got := readFiles(t, "SELECT count(*) FROM read_parquet("+clitest.SQLQuote(filepath.Join(out, "*", "*.parquet"))+
					", hive_partitioning = true, hive_types = {'value': VARCHAR}, filename = true) f JOIN read_parquet("+clitest.SQLQuote(filepath.Join(out, "*", "*.parquet"))+
					", hive_partitioning = false, filename = true) g USING (filename) WHERE f.value IS DISTINCT FROM g.value AND f.filename NOT LIKE '%~%'")
				require.Equal(t, [][]any{{int64(0)}}, got, "hive_partitioning reads the values back")
			}
		})
	}
}

// readFiles runs q, which reads exported files, on an in-memory DuckDB of
// its own (idem query reads no file but its database) and returns its rows.
func readFiles(t *testing.T, q string) [][]any {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(q)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out [][]any
	for rows.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		out = append(out, row)
	}
	require.NoError(t, rows.Err())
	return out
}
