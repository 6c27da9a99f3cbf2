package datatest

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/diff"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/stretchr/testify/require"
)

// csvRows parses an export into records keyed by the first column.
func csvRows(t *testing.T, data []byte) map[string][]string {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
	require.NoError(t, err)
	require.NotEmpty(t, recs, "an export has a header")
	out := map[string][]string{}
	for _, r := range recs[1:] {
		_, dup := out[r[0]]
		require.False(t, dup, "key %s appears twice", r[0])
		out[r[0]] = r
	}
	return out
}

func lineCount(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var n int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			n++
		}
	}
	require.NoError(t, sc.Err())
	return n
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// Both payload versions decode: v2 takes INR, v3 its own currency, amounts
// stay integer cents; every bad row is rejected with its own reason; and
// accepted plus quarantined equals the rows extracted, batch by batch.
func TestOrdersDecodeBothPayloadVersions(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	for _, f := range []string{"day-47.jsonl", "day-48.jsonl"} {
		res := e.Orders(f)
		require.Equal(t, report.DecisionApplied, res.Decision)
		require.Equal(t, lineCount(t, e.Fixture("orders/"+f)), res.RowsIn, "rows read")
		require.Equal(t, res.RowsIn, sum(res.Outcomes), "accepted + quarantined == extracted")
	}

	_, data := e.Export("orders", "--format", "jsonl")
	type order struct {
		OrderID     string `json:"order_id"`
		Position    int64  `json:"position"`
		AmountCents int64  `json:"amount_cents"`
		Currency    string `json:"currency"`
		EventDay    int    `json:"event_day"`
	}
	got := map[string]order{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		require.NotContains(t, line, ".", "amounts are integer cents, never decimals: %s", line)
		var o order
		require.NoError(t, json.Unmarshal([]byte(line), &o))
		got[o.OrderID] = o
	}
	require.Equal(t, map[string]order{
		"ord-12": {"ord-12", 103, 120000, "INR", 47}, // v2
		"ord-47": {"ord-47", 101, 7350, "INR", 47},   // v2
		"ord-83": {"ord-83", 102, 4200, "USD", 47},   // v3
		"ord-48": {"ord-48", 201, 5000, "EUR", 48},   // v3
		"ord-49": {"ord-49", 205, 1099, "INR", 48},   // v2, the later of two events in the batch
		"ord-50": {"ord-50", 203, 2500, "GBP", 48},   // v3, sent twice
	}, got)

	// One bad row of each kind, each with its reason.
	var outcomes [][]any
	rows, err := inspect.Query(context.Background(), e.DB, `SELECT order_id, outcome FROM orders_outcomes WHERE batch_id = 'day-48.jsonl' AND outcome LIKE 'invalid%' ORDER BY line`, run.OpenOptions{})
	require.NoError(t, err)
	outcomes = rows.Values
	require.Equal(t, [][]any{
		{" ", "invalid_order_id"},
		{"ord-51", "invalid_position"},
		{"ord-52", "invalid_kind"},
		{"ord-53", "invalid_schema_version"},
		{"ord-54", "invalid_amount"},    // 73.50: not integer cents
		{"ord-55", "invalid_currency"},  // v3 "usd"
		{"ord-56", "invalid_currency"},  // v3 without a currency
		{"ord-57", "invalid_currency"},  // v2 carrying one
		{"ord-58", "invalid_event_day"}, // "48th"
	}, outcomes)
}

// The fixture sequence, outcomes and state, against golden files.
func TestOrdersGolden(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	e.OrdersDays()
	e.Orders("day-52-delete.jsonl")
	_, state := e.Export("orders")
	clitest.SnapGolden(t, "orders/state.csv", state)
	_, outcomes := e.Export("orders", "--table", "orders_outcomes")
	clitest.SnapGolden(t, "orders/outcomes.csv", outcomes)
	_, tombstones := func() (any, []byte) {
		rows, err := inspect.Query(context.Background(), e.DB, `SELECT order_id, position FROM orders_tombstones ORDER BY order_id`, run.OpenOptions{})
		require.NoError(t, err)
		return nil, []byte(fmt.Sprint(rows.Values))
	}()
	require.Equal(t, "[[ord-47 310]]", string(tombstones))
}

// Writer B commits a deletion against parent S; writer A's correction,
// prepared against S, is refused as stale (exit 3) and commits nothing; A
// reloads, rebuilds against S+1, and its correction, older than the delete,
// cannot resurrect the order.
func TestOrdersStaleParentCannotResurrect(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	e.OrdersDays()
	const s = 3

	b := e.Orders("day-52-delete.jsonl", "--expect-parent", fmt.Sprint(s))
	require.Equal(t, int64(s+1), b.Snapshot)
	require.Equal(t, int64(s), b.Parent)

	a := e.Idem("run", e.Config("orders"), "--input", e.Fixture("orders/writer-a-correction.jsonl"), "--expect-parent", fmt.Sprint(s))
	require.Equal(t, report.ExitRefused, a.Code, a.Stderr)
	require.Contains(t, a.Stderr, fmt.Sprintf("stale parent: expected %d, latest is %d", s, s+1))
	var latest export.Result
	e.Ok(&latest, "export", e.Config("orders"), "--out", filepath.Join(e.Dir, "after-refusal.csv"))
	require.Equal(t, int64(s+1), latest.Snapshot, "the refused candidate committed nothing")

	// A reloads the latest snapshot and rebuilds its candidate on it.
	reloaded := e.Orders("writer-a-correction.jsonl", "--expect-parent", fmt.Sprint(s+1))
	require.Equal(t, int64(s+2), reloaded.Snapshot)
	require.Equal(t, map[string]int64{"stale": 1}, reloaded.Outcomes, "the correction (position 305) is older than the delete (310)")
	_, data := e.Export("orders")
	require.NotContains(t, csvRows(t, data), "ord-47")
}

// A diff between snapshots names the removed order; a diff of two exported
// files says the same.
func TestDiffNamesRemovedOrder(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	e.OrdersDays()
	e.Orders("day-52-delete.jsonl")

	var d diff.Result
	e.Ok(&d, "diff", e.Config("orders"), "--from", "3", "--to", "4")
	require.Equal(t, []string{"ord-47"}, d.RemovedKeys)
	require.Equal(t, int64(1), d.Removed)
	require.Equal(t, int64(0), d.Added)
	require.Equal(t, int64(0), d.Changed)
	require.NotEqual(t, d.From.SHA256, d.To.SHA256)
	from, _ := e.Export("orders", "--snapshot", "3")
	to, _ := e.Export("orders", "--snapshot", "4")
	require.Equal(t, from.SHA256, d.From.SHA256, "a side's sha256 is that of its csv export")
	require.Equal(t, to.SHA256, d.To.SHA256)

	e.Ok(&d, "diff", e.Config("orders"), "--from", "1", "--to", "3")
	require.Equal(t, []string{"ord-48", "ord-49", "ord-50"}, d.AddedKeys)
	require.Equal(t, []string{"ord-12", "ord-83"}, d.ChangedKeys, "the late corrections of day 47")

	var files diff.Result
	e.Ok(&files, "diff", from.Path, to.Path)
	require.Equal(t, []string{"ord-47"}, files.RemovedKeys)
	require.Equal(t, []string{"order_id"}, files.Key)
	require.Equal(t, from.SHA256, files.From.SHA256)

	human := e.Idem("diff", e.Config("orders"), "--from", "3", "--to", "4")
	require.Equal(t, 0, human.Code, human.Stderr)
	require.Contains(t, human.Stdout, "removed  1  ord-47")
}

// A snapshot whose stored rows differ from what its inputs rebuild is not
// reproduced: exit 1 with the difference. A transform whose files changed
// since the snapshot was built is refused (exit 3).
func TestRerunDetectsDifferences(t *testing.T) {
	t.Parallel()
	t.Run("tampered history", func(t *testing.T) {
		t.Parallel()
		e := clitest.NewSnapEnv(t)
		e.OrdersDays()
		db, err := run.Open(context.Background(), e.DB, run.OpenOptions{})
		require.NoError(t, err)
		_, err = db.SQL().Exec(`UPDATE ` + catalog.HistoryTable("orders") + ` SET amount_cents = 1 WHERE order_id = 'ord-47'`)
		require.NoError(t, err)
		require.NoError(t, db.Close())
		res := e.Idem("rerun", e.Config("orders"), "--snapshot", "2", "--json")
		require.Equal(t, report.ExitFailure, res.Code, res.Stderr)
		var r history.RerunResult
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &r))
		require.False(t, r.Reproduced)
		require.NotNil(t, r.Diff)
		require.Equal(t, []string{"ord-47"}, r.Diff.ChangedKeys)
		// Why: the column that differs, the stored and the rebuilt value,
		// and the rebuilt rows kept beside the database.
		require.Len(t, r.Diff.ChangedRows, 1)
		require.Equal(t, "ord-47", r.Diff.ChangedRows[0].Key)
		require.Len(t, r.Diff.ChangedRows[0].Columns, 1)
		col := r.Diff.ChangedRows[0].Columns[0]
		require.Equal(t, "amount_cents", col.Column)
		require.Equal(t, "1", *col.From)
		rebuilt, err := strconv.ParseFloat(*col.To, 64)
		require.NoError(t, err)
		require.Equal(t, rebuilt-1, *col.Delta)
		require.Equal(t, e.DB+".reruns/orders-snapshot-2-rebuilt.csv", r.RebuiltPath)
		kept, err := os.ReadFile(r.RebuiltPath)
		require.NoError(t, err)
		require.Contains(t, string(kept), "ord-47,")
		human := e.Idem("rerun", e.Config("orders"), "--snapshot", "2")
		require.Equal(t, report.ExitFailure, human.Code, human.Stderr)
		require.Contains(t, human.Stdout, "orders: snapshot 2 NOT reproduced")
		require.Contains(t, human.Stdout, "  row ord-47\n")
		require.Regexp(t, `\n    amount_cents +"1" -> "`+*col.To+`"  \(\+`, human.Stdout)
		require.Contains(t, human.Stdout, "the rebuilt rows are kept in "+r.RebuiltPath+"\n")
	})
	t.Run("edited transform", func(t *testing.T) {
		t.Parallel()
		e := clitest.NewSnapEnv(t)
		// A copy of the orders pipeline on disk, beside a job file using it.
		pipe := filepath.Join(e.Dir, "orders_copy")
		copyTree(t, filepath.Join(e.Root, "pipelines", "orders"), pipe)
		jobFile := filepath.Join(e.Dir, "orders.toml")
		require.NoError(t, os.WriteFile(jobFile, []byte(`name = "orders"
pipeline = "`+pipe+`"
transform_version = 1
schema_version = 1
[input]
path = "`+e.Fixture("orders/day-47.jsonl")+`"
[target]
table = "orders"
`), 0o644))
		var r run.Result
		e.Ok(&r, "run", jobFile)
		step := filepath.Join(pipe, "transform", "v1", "04_commit.sql")
		data, err := os.ReadFile(step)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(step, append(data, []byte("\n-- edited\n")...), 0o644))
		res := e.Idem("rerun", jobFile, "--snapshot", "1")
		require.Equal(t, report.ExitRefused, res.Code, res.Stderr)
		require.Contains(t, res.Stderr, "was built with transform v1 of orders")
	})
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	}))
}

// An erased subject is absent from every snapshot's export, from the
// outcomes and from the retained inputs; replaying the old raw batch under a
// new id drops it as erased (and stores no copy of it); a rollback to a
// snapshot taken before the erasure does not bring it back.
func TestEraseSurvivesReplayAndRollback(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	e.OrdersDays()
	e.Orders("day-52-delete.jsonl")
	const subject = "ord-83"
	require.NotEmpty(t, clitest.StoreHolds(t, e.DB, subject))
	_, before := e.Export("orders", "--snapshot", "3")
	require.Contains(t, csvRows(t, before), subject)

	var er history.EraseResult
	e.Ok(&er, "erase", e.Config("orders"), "--key", subject)
	require.Equal(t, int64(5), er.Snapshot)
	require.Equal(t, int64(301), *er.Position, "the highest position seen for the key")
	require.Len(t, er.Inputs, 2, "day 47 and the late correction held the subject")
	require.Equal(t, int64(1), er.Removed["orders"])
	require.Equal(t, int64(2), er.Removed["orders_outcomes"])

	absentEverywhere := func(latest int64) {
		t.Helper()
		for _, table := range []string{"orders", "orders_outcomes"} {
			_, exports := clitest.ExportSnapshots(t, e.DB, e.Config("orders"), table, latest)
			for s, data := range exports {
				require.NotContains(t, string(data), subject, "snapshot %d of %s", s, table)
			}
		}
		require.Empty(t, clitest.StoreHolds(t, e.DB, subject), "retained inputs")
	}
	absentEverywhere(5)

	// Erasing again changes nothing.
	var again history.EraseResult
	e.Ok(&again, "erase", e.Config("orders"), "--key", subject)
	require.True(t, again.AlreadyErased)
	require.Equal(t, int64(5), again.Snapshot)

	// The old raw batches, replayed under new ids.
	for i, f := range []string{"day-47.jsonl", "day-52-correction.jsonl"} {
		res := e.Orders(f, "--batch-id", fmt.Sprintf("replay-%d", i))
		require.Equal(t, int64(1), res.Outcomes["erased"], f)
	}
	absentEverywhere(7)

	// Rollback to a snapshot taken before the erasure.
	var rb history.RollbackResult
	e.Ok(&rb, "rollback", e.Config("orders"), "--to-snapshot", "3")
	require.Equal(t, int64(8), rb.Snapshot)
	_, data := e.Export("orders")
	rows := csvRows(t, data)
	require.NotContains(t, rows, subject)
	require.Contains(t, rows, "ord-47", "snapshot 3 predates the delete")
	absentEverywhere(8)

	// A newer event of the subject, above the erasure point, is a new life.
	newer := filepath.Join(e.Dir, "newer.jsonl")
	require.NoError(t, os.WriteFile(newer, []byte(`{"order_id":"ord-83","position":400,"kind":"upsert","amount_cents":1,"event_day":60,"schema_version":3,"currency":"USD"}`+"\n"), 0o644))
	var res run.Result
	e.Ok(&res, "run", e.Config("orders"), "--input", newer)
	require.Equal(t, map[string]int64{"accepted": 1}, res.Outcomes)
}

// A rollback that would expose an erased subject is refused (exit 3) and
// commits nothing. Erasure scrubs history, so the test puts a row of the
// subject back in an old snapshot's history, as a restored backup might.
func TestRollbackOverErasureIsRefused(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	e.OrdersDays()
	e.Ok(nil, "erase", e.Config("orders"), "--key", "ord-83")
	db, err := run.Open(context.Background(), e.DB, run.OpenOptions{})
	require.NoError(t, err)
	_, err = db.SQL().Exec(`INSERT INTO ` + catalog.HistoryTable("orders") + ` VALUES ('ord-83', 102, 4200, 'USD', 47, 1, 3)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	res := e.Idem("rollback", e.Config("orders"), "--to-snapshot", "2")
	require.Equal(t, report.ExitRefused, res.Code, res.Stderr)
	require.Contains(t, res.Stderr, "rollback over an erasure")
	var latest export.Result
	e.Ok(&latest, "export", e.Config("orders"), "--out", filepath.Join(e.Dir, "latest.csv"))
	require.Equal(t, int64(4), latest.Snapshot, "nothing committed")

	// Snapshot 3 lies outside the restored row's range (1, 2): allowed.
	var rb history.RollbackResult
	e.Ok(&rb, "rollback", e.Config("orders"), "--to-snapshot", "3")
	require.Equal(t, int64(5), rb.Snapshot)
}

// Outcomes are pinned by batch: snapshot S shows the outcomes of the
// batches committed at or before S.
func TestExportPinnedOutcomes(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	e.OrdersDays()
	counts := map[string]int64{}
	for _, s := range []string{"1", "2", "3"} {
		res, _ := e.Export("orders", "--table", "orders_outcomes", "--snapshot", s)
		counts[s] = res.Rows
	}
	require.Equal(t, map[string]int64{"1": 3, "2": 17, "3": 20}, counts)

	bad := e.Idem("export", e.Config("orders"), "--table", "nope", "--out", filepath.Join(e.Dir, "x.csv"))
	require.Equal(t, report.ExitUsage, bad.Code)
	require.Contains(t, bad.Stderr, "export reads the job's target orders or orders_outcomes")
	missing := e.Idem("export", e.Config("orders"), "--snapshot", "9", "--out", filepath.Join(e.Dir, "x.csv"))
	require.Equal(t, report.ExitUsage, missing.Code)
	require.Contains(t, missing.Stderr, "has no snapshot 9 (latest is 3)")
}

// Accepted plus rejected must equal the rows read: a stage that loses a row
// (here, a copy of the orders pipeline edited to drop one) is caught before
// COMMIT, exit 1, and nothing is committed.
func TestOrdersBalanceIsCheckedBeforeCommit(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	pipe := filepath.Join(e.Dir, "orders_lossy")
	copyTree(t, filepath.Join(e.Root, "pipelines", "orders"), pipe)
	stage := filepath.Join(pipe, "transform", "v1", "01_stage.sql")
	data, err := os.ReadFile(stage)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(stage, append(data, []byte("\nDELETE FROM staged WHERE order_id = 'ord-12';\n")...), 0o644))
	jobFile := filepath.Join(e.Dir, "orders.toml")
	require.NoError(t, os.WriteFile(jobFile, []byte(`name = "orders"
pipeline = "`+pipe+`"
transform_version = 1
schema_version = 1
[input]
path = "`+e.Fixture("orders/day-47.jsonl")+`"
`), 0o644))
	res := e.Idem("run", jobFile)
	require.Equal(t, report.ExitFailure, res.Code, res.Stderr)
	require.Contains(t, res.Stderr, "outcomes do not balance the rows read; nothing committed")
	rows, err := inspect.Query(context.Background(), e.DB, `SELECT count(*) FROM idem.snapshots`, run.OpenOptions{})
	require.NoError(t, err)
	require.Equal(t, [][]any{{int64(0)}}, rows.Values)
}

// Erasure rewrites retained csv and parquet inputs too: no retained file
// holds a row of the subject afterwards, and the snapshots still rebuild.
func TestEraseRewritesCSVAndParquetInputs(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"csv", "parquet"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			e := clitest.NewSnapEnv(t)
			conv, err := run.Open(context.Background(), filepath.Join(e.Dir, "convert.duckdb"), run.OpenOptions{})
			require.NoError(t, err)
			var inputs []string
			for _, day := range []string{"day-47", "day-52-correction"} {
				out := filepath.Join(e.Dir, day+"."+format)
				_, err := conv.SQL().Exec(`COPY (SELECT * FROM read_json('` + e.Fixture("orders/"+day+".jsonl") + `', format = 'newline_delimited',
					columns = {order_id: 'VARCHAR', position: 'BIGINT', kind: 'VARCHAR', amount_cents: 'BIGINT', event_day: 'INTEGER', schema_version: 'INTEGER', currency: 'VARCHAR'}))
					TO '` + out + `' (FORMAT ` + format + `)`)
				require.NoError(t, err)
				inputs = append(inputs, out)
			}
			require.NoError(t, conv.Close())
			jobFile := filepath.Join(e.Dir, "orders.toml")
			require.NoError(t, os.WriteFile(jobFile, []byte("name = \"orders\"\npipeline = \"orders\"\ntransform_version = 1\nschema_version = 1\n"), 0o644))
			for _, in := range inputs {
				e.Ok(nil, "run", jobFile, "--input", in)
			}
			var er history.EraseResult
			e.Ok(&er, "erase", jobFile, "--key", "ord-83")
			require.Len(t, er.Inputs, 2)
			require.Equal(t, int64(301), *er.Position)

			db, err := run.Open(context.Background(), e.DB, run.OpenOptions{ReadOnly: true})
			require.NoError(t, err)
			reader := "read_csv(?, all_varchar = true)"
			if format == "parquet" {
				reader = "read_parquet(?)"
			}
			var files []string
			require.NoError(t, filepath.WalkDir(e.DB+".inputs", func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					files = append(files, p)
				}
				return err
			}))
			require.Len(t, files, 2, "the old copies are gone")
			for _, f := range files {
				var total, subject int64
				require.NoError(t, db.SQL().QueryRow(`SELECT count(*), count(*) FILTER (WHERE order_id = 'ord-83') FROM `+reader, f).Scan(&total, &subject))
				require.Zero(t, subject, f)
				require.Equal(t, int64(2), total, "the other rows stay")
			}
			require.NoError(t, db.Close())
			for _, s := range []string{"1", "2", "3"} {
				var rr history.RerunResult
				e.Ok(&rr, "rerun", jobFile, "--snapshot", s)
				require.True(t, rr.Reproduced, "snapshot %s", s)
			}
		})
	}
}

// An erased entity of versioned_changes is absent from every snapshot, its
// old changes replayed under a new batch id come out 'erased' with no
// value kept (neither payload nor key), and a change above the erasure point is a new life.
func TestVersionedChangesErase(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	jobFile := e.Config("versioned_changes")
	for _, b := range []string{"batch-1", "batch-2", "batch-3"} {
		e.Ok(nil, "run", jobFile, "--input", e.Fixture("changes/"+b+".jsonl"))
	}
	const subject = "account-4"
	var er history.EraseResult
	e.Ok(&er, "erase", jobFile, "--key", subject)
	require.Equal(t, int64(4), er.Snapshot)
	require.Equal(t, int64(4), *er.Position, "account-4's highest source_version")
	require.Empty(t, clitest.StoreHolds(t, e.DB, `"`+subject+`"`), "retained inputs")

	var res run.Result
	e.Ok(&res, "run", jobFile, "--input", e.Fixture("changes/batch-1.jsonl"), "--batch-id", "replay-1")
	require.Equal(t, int64(2), res.Outcomes["erased"], "both of batch 1's account-4 changes")
	for s := int64(1); s <= res.Snapshot; s++ {
		for _, table := range []string{"customer_state", "customer_state_outcomes"} {
			_, data := e.Export("versioned_changes", "--table", table, "--snapshot", fmt.Sprint(s))
			require.NotContains(t, string(data), subject, "snapshot %d of %s: an erased key", s, table)
			require.NotContains(t, string(data), "blue", "snapshot %d of %s: an erased payload", s, table)
		}
	}
	require.Empty(t, clitest.StoreHolds(t, e.DB, `"`+subject+`"`), "the replayed batch is retained without the subject")

	newer := filepath.Join(e.Dir, "newer.jsonl")
	require.NoError(t, os.WriteFile(newer, []byte(`{"change_id":"n-1","entity_id":"account-4","source_version":5,"operation":"upsert","value":"violet"}`+"\n"), 0o644))
	var fresh run.Result
	e.Ok(&fresh, "run", jobFile, "--input", newer)
	require.Equal(t, map[string]int64{"accepted": 1}, fresh.Outcomes)
}

// A rollback is a writer: --expect-parent and --epoch refuse it (exit 3,
// nothing committed) when another writer committed or fenced since it was
// prepared, as they refuse a run.
func TestRollbackWriterGuards(t *testing.T) {
	t.Parallel()
	e := clitest.NewSnapEnv(t)
	e.OrdersDays() // snapshots 1-3
	var fence struct{ Epoch int64 }
	e.Ok(&fence, "fence", e.Config("orders"))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"stale parent", []string{"--expect-parent", "2"}, "stale parent: expected 2, latest is 3"},
		{"stale epoch", []string{"--epoch", fmt.Sprint(fence.Epoch - 1)}, fmt.Sprintf("stale writer: epoch %d is not the job's current epoch %d", fence.Epoch-1, fence.Epoch)},
	}
	for _, tc := range cases {
		res := e.Idem(append([]string{"rollback", e.Config("orders"), "--to-snapshot", "1"}, tc.args...)...)
		require.Equal(t, report.ExitRefused, res.Code, "%s: %s", tc.name, res.Stderr)
		require.Contains(t, res.Stderr, tc.want, tc.name)
		var latest export.Result
		e.Ok(&latest, "export", e.Config("orders"), "--out", filepath.Join(e.Dir, "latest.csv"))
		require.Equal(t, int64(3), latest.Snapshot, "%s: nothing committed", tc.name)
	}
	var rb history.RollbackResult
	e.Ok(&rb, "rollback", e.Config("orders"), "--to-snapshot", "1", "--expect-parent", "3", "--epoch", fmt.Sprint(fence.Epoch))
	require.Equal(t, int64(4), rb.Snapshot)
}
