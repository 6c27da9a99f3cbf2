package job_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIcebergInput: [input] iceberg names the table once, reads appends
// only into an apply pipeline, combines with no other input, and is
// refused with the file, the line and the key otherwise.
func TestIcebergInput(t *testing.T) {
	t.Parallel()
	in := "[input]\niceberg = "
	for _, c := range []struct{ name, text, want string }{
		{"two tables", sampleHead + in + `{ location = "t", metadata = "t/metadata/v1.metadata.json" }` + "\n", `job.toml:6: input.iceberg: name the table once: location = "path/to/table" (its folder), metadata = "path/to/vN.metadata.json", or catalog = "..." with table = "namespace.table"`},
		{"no table", sampleHead + in + "{ }\n", "job.toml:6: input.iceberg: name the table once"},
		{"catalog without table", sampleHead + in + `{ catalog = "c.db" }` + "\n", `job.toml:6: input.iceberg: catalog and table go together`},
		{"table without namespace", sampleHead + in + `{ catalog = "c.db", table = "t" }` + "\n", `job.toml:6: input.iceberg: table = "t": write namespace.table`},
		{"catalog_name alone", sampleHead + in + `{ location = "t", catalog_name = "x" }` + "\n", `job.toml:6: input.iceberg: catalog_name names a catalog of catalog = "..."`},
		{"appends into refresh", sampleHead + in + `{ location = "t", read = "appends" }` + "\n", `job.toml:6: input.iceberg: read = "appends" feeds an apply pipeline (each batch the rows appended since the last); sample is a refresh pipeline: read the whole snapshot (read = "snapshot")`},
		{"bad read", sampleHead + in + `{ location = "t", read = "all" }` + "\n", `job.toml:6: input.iceberg: read must be "snapshot" or "appends" (got "all")`},
		{"with a path", sampleHead + "[input]\npath = \"a.csv\"\niceberg = { location = \"t\" }\n", "job.toml:6: input.path: an Iceberg input reads its table, not files: remove path"},
		{"unknown key", sampleHead + in + `{ locaton = "t" }` + "\n", "job.toml:6: input.iceberg.locaton: unknown key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadJobText(t, c.text, nil)
			require.Contains(t, err, c.want)
		})
	}

	j, err := loadJobText(t, mergeHead+in+`{ location = "lake/t", read = "appends" }`+"\n"+mergeCols+"[target]\nkey = [\"id\"]\n", nil)
	require.Empty(t, err)
	require.True(t, j.ReadsIceberg())
	require.Equal(t, filepath.Join(filepath.Dir(j.File), "lake", "t"), j.Input.Iceberg.Location)
	require.Equal(t, map[string]any{"read": "appends"}, j.Config("iceberg")["iceberg"])
	j, err = loadJobText(t, sampleHead+in+`{ catalog = "postgres://u@h/db", table = "a.b.t" }`+"\n", nil)
	require.Empty(t, err)
	require.Equal(t, "postgres://u@h/db", j.Input.Iceberg.Catalog, "a URL is not a path")
	require.Equal(t, "snapshot", j.Input.Iceberg.Read)
}
