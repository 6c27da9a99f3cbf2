package run_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/pipelines"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// vcConfigRun is a line of the config's comment: `idem run
// configs/versioned_changes.toml [--input PATH]`.
var vcConfigRun = regexp.MustCompile(`^#\s+idem run configs/versioned_changes\.toml(?:\s+--input\s+(\S+))?\s*$`)

// vcFixtureOrder reads the order in which configs/versioned_changes.toml
// tells a user to apply the fixture batches, as paths relative to the repo.
func vcFixtureOrder(t *testing.T, j *job.Job) []string {
	t.Helper()
	f, err := os.Open(j.File)
	require.NoError(t, err)
	defer f.Close()
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := vcConfigRun.FindStringSubmatch(sc.Text()); m != nil {
			p := m[1]
			if p == "" { // the job's own input, read from configs/
				rel, err := filepath.Rel("../..", j.Input.Path)
				require.NoError(t, err)
				p = rel
			}
			order = append(order, p)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, order, "no `idem run` lines in %s", j.File)
	return order
}

// TestVersionedChangesFixtures applies the fixture batches in the order the
// example config documents, each under its default batch id (the file's
// base name), and compares every outcome and the target after every batch
// with golden files; it also checks both against the Go model, so a golden
// file cannot bless a wrong answer.
func TestVersionedChangesFixtures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j, err := run.LoadJob(filepath.Join("../..", "configs", "versioned_changes.toml"), pipelines.FS)
	require.NoError(t, err)
	order := vcFixtureOrder(t, j)
	db, err := run.Open(ctx, filepath.Join(t.TempDir(), "idem.duckdb"), run.OpenOptions{})
	require.NoError(t, err)
	defer db.Close()

	var runs, states strings.Builder
	model := vcModel{}
	var wantOutcomes []string
	seen := map[string]bool{}
	for _, rel := range order {
		path := filepath.Join("../..", rel)
		res, err := db.Run(ctx, j, run.RunOptions{Input: path})
		require.NoError(t, err, rel)
		require.Equal(t, report.DecisionApplied, res.Decision, rel)
		batch := filepath.Base(rel)
		require.Equal(t, batch, res.BatchID)
		fmt.Fprintf(&runs, "%s: %s snapshot %d rows_in %d rows_out %d outcomes %s\n",
			res.BatchID, res.Decision, res.Snapshot, res.RowsIn, res.RowsOut, vcFormatCounts(res.Outcomes))

		texts := vcReadJSONLTexts(t, path)
		labels, _ := model.batchOutcomes(texts)
		model = model.fold(texts)
		for i, r := range texts {
			wantOutcomes = append(wantOutcomes, fmt.Sprintf("%s | %s -> %s", batch, r, labels[i]))
			seen[labels[i]] = true
		}
		require.Equal(t, vcCountOutcomes(labels), res.Outcomes, "%s: outcome counts against the model", batch)

		rows := vcQueryTable(t, db.SQL(), `SELECT entity_id, source_version, status, value FROM customer_state ORDER BY entity_id`)
		fmt.Fprintf(&states, "after %s (snapshot %d)\n%s\n", batch, res.Snapshot, rows)
		gotState := vcReadStoredRows(t, db.SQL(), `SELECT entity_id, source_version, status, value FROM customer_state ORDER BY entity_id`)
		require.Equal(t, vcStringsOf(model.rows()), vcStringsOf(gotState), "%s: target against the fold", batch)
	}

	// A retry of the first batch under its own id changes nothing.
	res, err := db.Run(ctx, j, run.RunOptions{Input: filepath.Join("../..", order[0])})
	require.NoError(t, err)
	fmt.Fprintf(&runs, "%s again: %s snapshot %d rows_in %d outcomes %s\n",
		res.BatchID, res.Decision, res.Snapshot, res.RowsIn, vcFormatCounts(res.Outcomes))

	for _, o := range []string{ocInvalidChangeID, ocInvalidEntityID, ocInvalidVersion, ocInvalidOp, ocInvalidPayload,
		ocSuperseded, ocAccepted, ocStale, ocDuplicate, ocConflict} {
		require.True(t, seen[o], "the fixtures never produce outcome %s", o)
	}

	// The stored outcomes in application order (the ledger's snapshot),
	// then by content: a total order, since identical rows are
	// interchangeable.
	outcomeSQL := `SELECT o.batch_id, o.change_id, o.entity_id, o.source_version, o.operation, o.value, o.outcome
		FROM customer_state_outcomes o JOIN idem.ledger l ON l.job = 'customer_state' AND l.batch_id = o.batch_id
		ORDER BY l.snapshot, o.change_id NULLS FIRST, o.entity_id NULLS FIRST, o.source_version NULLS FIRST,
		         o.operation NULLS FIRST, o.value NULLS FIRST, o.outcome`
	gotOutcomes := vcReadOutcomeRows(t, db.SQL(), outcomeSQL)
	sort.Strings(wantOutcomes)
	sort.Strings(gotOutcomes)
	require.Equal(t, wantOutcomes, gotOutcomes, "stored outcomes against the model")

	active := vcQueryTable(t, db.SQL(), `SELECT entity_id, source_version, value FROM customer_state_active ORDER BY entity_id`)
	vcGolden(t, "runs.txt", runs.String())
	vcGolden(t, "outcomes.txt", vcQueryTable(t, db.SQL(), outcomeSQL))
	vcGolden(t, "states.txt", states.String()+"customer_state_active at the end\n"+active)
}

// vcGolden compares got with testdata/versioned_changes/name, or rewrites the
// file under -update.
func vcGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "versioned_changes", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test ./internal/run -run %s -update", t.Name())
	if string(want) != got {
		t.Errorf("%s differs from the golden file (- golden, + got; rewrite with -update if the change is intended):\n%s",
			path, vcDiffLines(strings.Split(string(want), "\n"), strings.Split(got, "\n")))
	}
}

func vcFormatCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// vcReadJSONLTexts reads a JSON Lines fixture into rows as DuckDB reads them.
func vcReadJSONLTexts(t *testing.T, path string) []vcText {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []vcText
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var obj map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(line), &obj), "%s: %s", path, line)
		var row vcRow
		for i, c := range vcColumns {
			row[i] = string(obj[c])
		}
		out = append(out, row.text())
	}
	return out
}

// vcQueryTable renders a query's rows as an aligned text table: NULL for
// SQL NULL, strings quoted when they are empty or hold spaces or quotes.
func vcQueryTable(t *testing.T, db *sql.DB, query string) string {
	t.Helper()
	rows, err := db.Query(query)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	table := [][]string{cols}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		line := make([]string, len(cols))
		for i, v := range vals {
			line[i] = vcCell(v)
		}
		table = append(table, line)
	}
	require.NoError(t, rows.Err())
	widths := make([]int, len(cols))
	for _, r := range table {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range table {
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
			} else {
				fmt.Fprintf(&b, "%-*s  ", widths[i], c)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func vcCell(v sql.NullString) string {
	if !v.Valid {
		return "NULL"
	}
	if v.String == "" || v.String == "NULL" || strings.ContainsAny(v.String, " \t\n\v\f\r\"") {
		return fmt.Sprintf("%q", v.String)
	}
	return v.String
}

func vcReadStoredRows(t *testing.T, db *sql.DB, query string) []vcStored {
	t.Helper()
	rows, err := db.Query(query)
	require.NoError(t, err)
	defer rows.Close()
	var out []vcStored
	for rows.Next() {
		var s vcStored
		var v sql.NullString
		require.NoError(t, rows.Scan(&s.Entity, &s.Version, &s.Status, &v))
		if v.Valid {
			s.Value = &v.String
		}
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// vcReadOutcomeRows reads (batch, five input fields, outcome) rows in the
// form the model's expectations are written.
func vcReadOutcomeRows(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var batch, outcome string
		var f [5]sql.NullString
		require.NoError(t, rows.Scan(&batch, &f[0], &f[1], &f[2], &f[3], &f[4], &outcome))
		var r vcText
		for i := range f {
			if f[i].Valid {
				r[i] = &f[i].String
			}
		}
		out = append(out, fmt.Sprintf("%s | %s -> %s", batch, r, outcome))
	}
	require.NoError(t, rows.Err())
	return out
}
