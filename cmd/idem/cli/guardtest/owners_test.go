package guardtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/idem-dev/idem/internal/planner"
	"github.com/stretchr/testify/require"
)

// ownerJob writes a versioned_changes job file named name with target
// table into dir, on database db, and returns its path.
func ownerJob(t *testing.T, dir, db, name, table string) string {
	t.Helper()
	file := filepath.Join(dir, fmt.Sprintf("%s-%s.toml", name, table))
	toml := fmt.Sprintf(`name = %q
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q
format = "jsonl"

[target]
table = %q
`+clitest.DuckdbSection, name, db, clitest.ChangesFixture(t, "batch-1.jsonl"), table)
	require.NoError(t, os.WriteFile(file, []byte(toml), 0o644))
	return file
}

// TestTablesBelongToOneJob: a job's target, its companions and its history
// belong to it. Another job that would create or write one of them, by any
// spelling of the name, is refused with exit 3 naming the owner, and the
// database is left exactly as it was; rollback and erase are held to the
// same rule.
func TestTablesBelongToOneJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		first [2]string // job, target committed first
		args  func(t *testing.T, dir, db string) []string
		want  string
	}{
		{"target of another job", [2]string{"joba", "cs"}, func(t *testing.T, dir, db string) []string {
			return []string{"run", ownerJob(t, dir, db, "jobc", "cs")}
		}, `refused: table "cs" belongs to job "joba"`},
		{"target spelled in other case", [2]string{"joba", "cs"}, func(t *testing.T, dir, db string) []string {
			return []string{"run", ownerJob(t, dir, db, "jobc", "CS")}
		}, `refused: table "CS" belongs to job "joba"`},
		{"companion of another job", [2]string{"joba", "cs"}, func(t *testing.T, dir, db string) []string {
			return []string{"run", ownerJob(t, dir, db, "jobd", "cs_outcomes")}
		}, `refused: table "cs_outcomes" belongs to job "joba"`},
		{"target is another job's companion", [2]string{"jobd", "cs_outcomes"}, func(t *testing.T, dir, db string) []string {
			return []string{"run", ownerJob(t, dir, db, "joba", "cs")}
		}, `refused: table "cs_outcomes" belongs to job "jobd"`},
		{"active view of another job", [2]string{"joba", "cs"}, func(t *testing.T, dir, db string) []string {
			return []string{"run", ownerJob(t, dir, db, "jobd", "cs_active")}
		}, `refused: table "cs_active" belongs to job "joba"`},
		{"history name of another job", [2]string{"joba", "cs"}, func(t *testing.T, dir, db string) []string {
			return []string{"run", ownerJob(t, dir, db, "JOBA", "other")}
		}, `refused: history table idem."JOBA__history" belongs to job "joba"`},
		{"rollback into another job's target", [2]string{"joba", "cs"}, func(t *testing.T, dir, db string) []string {
			r := clitest.CallIdem(t, "run", ownerJob(t, dir, db, "jobe", "e"))
			require.Equal(t, 0, r.Code, r.Stderr)
			return []string{"rollback", ownerJob(t, dir, db, "jobe", "cs"), "--to-snapshot", "1"}
		}, `refused: table "cs" belongs to job "joba"`},
		{"erase in another job's target", [2]string{"joba", "cs"}, func(t *testing.T, dir, db string) []string {
			r := clitest.CallIdem(t, "run", ownerJob(t, dir, db, "jobe", "e"))
			require.Equal(t, 0, r.Code, r.Stderr)
			return []string{"erase", ownerJob(t, dir, db, "jobe", "cs"), "--key", "c-1"}
		}, `refused: table "cs" belongs to job "joba"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "idem.duckdb")
			r := clitest.CallIdem(t, "run", ownerJob(t, dir, db, tc.first[0], tc.first[1]))
			require.Equal(t, 0, r.Code, r.Stderr)
			args := tc.args(t, dir, db)
			before := clitest.CaptureState(t, db)
			r = clitest.CallIdem(t, args...)
			require.Equal(t, report.ExitRefused, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
			require.Contains(t, r.Stderr, tc.want)
			require.Equal(t, before, clitest.CaptureState(t, db), "a refused command changed the database")
			if args[0] == "run" {
				// plan says so too, without writing.
				r = clitest.CallIdem(t, "plan", args[1], "--json")
				require.Equal(t, report.ExitRefused, r.Code, "plan exits as the run would: %s", r.Stderr)
				var plan planner.Plan
				require.NoError(t, json.Unmarshal([]byte(r.Stdout), &plan), r.Stdout)
				require.Equal(t, report.DecisionRefused, plan.Decision)
				require.Contains(t, "refused: "+plan.Reason, tc.want)
			}
		})
	}
}

// TestOwnersOfAnOlderDatabase: a database written before idem.owners
// existed gets its owners from its jobs when it is next opened for writing
// (migration 0001):
// the target, its companions and the history.
func TestOwnersOfAnOlderDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "idem.duckdb")
	r := clitest.CallIdem(t, "run", ownerJob(t, dir, db, "joba", "cs"))
	require.Equal(t, 0, r.Code, r.Stderr)
	// Such a database has no catalog version row either (0001 creates
	// idem.owners and claims).
	// Nor what catalog versions 8 and 9 made: the record of migrations,
	// the commit log's columns and the views idem.commits and idem.packets
	// (tables then, which 0001 creates). One open does it all: an open
	// migrates a database without a version.
	clitest.ExecSQL(t, db, strings.Join([]string{
		"DROP TABLE idem.owners",
		"DROP TABLE idem.migrations",
		"DROP VIEW idem.commits", "DROP VIEW idem.packets",
		"ALTER TABLE idem.snapshots DROP COLUMN packet",
		"ALTER TABLE idem.runs DROP COLUMN seq", "ALTER TABLE idem.runs DROP COLUMN db_id",
		"DELETE FROM idem.meta WHERE key IN ('db_id', 'db_created_at', 'catalog_version')",
	}, ";\n"))

	for target, want := range map[string]string{
		"cs":          `table "cs" belongs to job "joba"`,
		"cs_outcomes": `table "cs_outcomes" belongs to job "joba"`,
	} {
		file := ownerJob(t, dir, db, "jobc", target)
		r := clitest.CallIdem(t, "run", file)
		require.Equal(t, report.ExitRefused, r.Code, r.Stderr)
		require.Contains(t, r.Stderr, want)
	}
	rows, err := inspect.Query(context.Background(), db, "SELECT name FROM idem.owners WHERE job = 'joba' ORDER BY name", run.OpenOptions{})
	require.NoError(t, err)
	require.Equal(t, [][]any{{"idem.joba__history"}, {"main.cs"}, {"main.cs_active"}, {"main.cs_outcomes"}}, rows.Values)
	// The owner itself runs on.
	r = clitest.CallIdem(t, "run", ownerJob(t, dir, db, "joba", "cs"), "--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
	require.Equal(t, 0, r.Code, r.Stderr)
}
