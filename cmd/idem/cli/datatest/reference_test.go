package datatest

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// TestReferenceTable: a reference table read from one CSV with [input] mode
// = "replace". Each edit of the file is a new snapshot that replaces the
// table (a row dropped from the file goes), never a refusal, and the
// project around it runs after each edit; the same content again, under
// any name, changes nothing; content reverted to an older one applies
// again; every snapshot reruns. A stray sqlfluff.toml beside the jobs is
// not read as one.
func TestReferenceTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clitest.WriteFile(t, filepath.Join(dir, "stations.toml"), `name = "stations"
pipeline = "merge_by_key"
transform_version = 2
schema_version = 1
database = "ref.duckdb"
[input]
path = "stations.csv"
mode = "replace"
[input.columns]
id = "BIGINT"
city = "VARCHAR"
[target]
key = ["id"]
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(dir, "by_city.toml"), `name = "by_city"
pipeline = "select"
transform_version = 1
database = "ref.duckdb"
[input]
upstream = ["stations"]
[transform]
sql = "models/by_city"
[target]
key = ["city"]
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(dir, "models", "by_city", "v1.sql"), "SELECT city, count(*) AS stations FROM {{upstream:stations}} GROUP BY city\n")
	// Another tool's TOML in the project folder is not a job file.
	clitest.WriteFile(t, filepath.Join(dir, "sqlfluff.toml"), "[sqlfluff]\ndialect = \"duckdb\"\n")
	db := filepath.Join(dir, "ref.duckdb")
	file := filepath.Join(dir, "stations.csv")
	job := filepath.Join(dir, "stations.toml")
	rows := func() []string {
		return clitest.QueryStrs(t, db, `SELECT id || ' ' || city FROM stations ORDER BY id`)
	}
	run := func(want string) {
		t.Helper()
		code, out, errOut := clitest.InProcess(t, "run", dir)
		require.Equal(t, 0, code, out+errOut)
		require.Contains(t, out, want)
	}
	v1 := "id,city\n1,Oslo\n2,Bergen\n3,Oslo\n"
	clitest.WriteFile(t, file, v1)
	run("stations: applied (first load)")
	run("stations: skipped")

	// Edited: a city renamed, a station gone, one added.
	clitest.WriteFile(t, file, "id,city\n1,Oslo\n2,Trondheim\n4,Bergen\n")
	run("stations: applied")
	require.Equal(t, []string{"1 Oslo", "2 Trondheim", "4 Bergen"}, rows())
	require.Equal(t, []string{"Bergen 1", "Oslo 1", "Trondheim 1"}, clitest.QueryStrs(t, db, `SELECT city || ' ' || stations FROM by_city ORDER BY city`))
	clitest.WriteFile(t, file, "id,city\n1,Oslo\n")
	run("stations: applied")
	require.Equal(t, []string{"1 Oslo"}, rows())

	// The same content under another name: nothing to do.
	other := filepath.Join(dir, "copy.csv")
	clitest.WriteFile(t, other, "id,city\n1,Oslo\n")
	code, out, errOut := clitest.InProcess(t, "run", job, "--input", other)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "stations: skipped")

	// Reverted to the first content: applied again, not already committed.
	clitest.WriteFile(t, file, v1)
	run("stations: applied")
	require.Equal(t, []string{"1 Oslo", "2 Bergen", "3 Oslo"}, rows())
	require.Equal(t, []string{"4"}, clitest.QueryStrs(t, db, `SELECT max(snapshot) FROM idem.snapshots WHERE job = 'stations'`))
	for s := 1; s <= 4; s++ {
		code, out, errOut := clitest.InProcess(t, "rerun", job, "--snapshot", strconv.Itoa(s), "--json")
		require.Equal(t, 0, code, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %d", s)
	}
}
