package dbtclitest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

const seedJob = `name = "stations"
pipeline = "merge_by_key"
transform_version = 2
schema_version = 1
database = "seed.duckdb"
[input]
path = "stations.csv"
mode = "replace"
%s[input.columns]
id = "BIGINT"
city = "VARCHAR"
[target]
key = ["id"]
` + clitest.DuckdbSection

// TestSeedConflictsRefused: a seed (a reference table) whose file holds a
// key twice with different values is refused, exit 3, naming the keys and
// their rows, and commits nothing; an exact repeat is no conflict; with
// [input] conflicts = "keep" the conflicts are stored as before; run
// --full-refresh applies the file again as a snapshot rerun reproduces.
func TestSeedConflictsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "stations.toml")
	csv := filepath.Join(dir, "stations.csv")
	db := filepath.Join(dir, "seed.duckdb")
	clitest.WriteFile(t, jobFile, strings.Replace(seedJob, "%s", "", 1))
	clitest.WriteFile(t, csv, "id,city\n1,Oslo\n2,Bergen\n2,Bergen\n")
	r := clitest.CallIdem(t, "run", jobFile)
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	before := clitest.CaptureState(t, db)

	clitest.WriteFile(t, csv, "id,city\n1,Oslo\n7,Tromsø\n2,Bergen\n7,Bodø\n9,Molde\n1,Oslo \n")
	r = clitest.CallIdem(t, "run", jobFile)
	require.Equal(t, 3, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stderr, "seed stations: 2 key(s) of "+csv+" hold rows with different values (4 rows): id=1 at rows 1, 6; id=7 at rows 2, 4; fix the file, or set [input] conflicts = \"keep\" to store them as conflict rows; nothing committed")
	require.Equal(t, before, clitest.CaptureState(t, db))
	// The run log keeps the refusal without the keys' values: it outlives
	// erasures.
	require.Equal(t, []string{"refused: seed stations: 2 key(s) hold rows with different values (4 rows); nothing committed"},
		clitest.QueryStrs(t, db, `SELECT message FROM idem.runs WHERE decision = 'refused'`))

	clitest.WriteFile(t, jobFile, strings.Replace(seedJob, "%s", "conflicts = \"keep\"\n", 1))
	r = clitest.CallIdem(t, "run", jobFile)
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Equal(t, []string{"1 conflict", "2 active", "7 conflict", "9 active"}, clitest.QueryStrs(t, db, `SELECT id || ' ' || idem_status FROM stations ORDER BY id`))

	// A seed's --full-refresh applies its file again, unchanged since
	// snapshot 2, as a new snapshot, which rerun reproduces.
	r = clitest.CallIdem(t, "run", jobFile, "--full-refresh")
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stdout, "stations: applied (full refresh)")
	require.Contains(t, r.Stdout, "snapshot  3")
	r = clitest.CallIdem(t, "rerun", jobFile)
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stdout, "stations: snapshot 3 reproduced")

	clitest.WriteFile(t, jobFile, strings.Replace(seedJob, "%s", "conflicts = \"ignore\"\n", 1))
	r = clitest.CallIdem(t, "run", jobFile)
	require.Equal(t, 2, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stderr, `input.conflicts`)
	require.Contains(t, r.Stderr, `must be "refuse" or "keep" (got "ignore")`)
}
