package run_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// vcBatchCase is one batch and the outcome each of its rows must get.
type vcBatchCase struct {
	rows     []vcRow
	outcomes []string
}

// applyExpect applies each batch in turn and checks every row's outcome.
func (e *vcEnv) applyExpect(batches ...vcBatchCase) {
	e.t.Helper()
	for i, b := range batches {
		id := fmt.Sprintf("batch-%d", e.n+1)
		e.applyRows(id, b.rows...)
		want := make([]vcOutcome, len(b.rows))
		for j, r := range b.rows {
			want[j] = vcOutcome{Row: r.text(), Outcome: b.outcomes[j]}
		}
		vcSortOutcomes(want)
		require.Equal(e.t, vcStringsOf(want), vcStringsOf(e.outcomes(id)), "batch %d", i+1)
	}
}

// stored is the one target row of entity, which must exist.
func (e *vcEnv) stored(entity string) vcStored {
	e.t.Helper()
	for _, s := range e.state() {
		if s.Entity == entity {
			return s
		}
	}
	e.t.Fatalf("no target row for entity %q", entity)
	return vcStored{}
}

func (e *vcEnv) isActive(entity string) bool {
	e.t.Helper()
	for _, s := range e.active() {
		if s.Entity == entity {
			return true
		}
	}
	return false
}

func vcUp(id, entity string, v int64, value string) vcRow {
	return vcChange(id, entity, v, "upsert", &value)
}

func vcDel(id, entity string, v int64) vcRow { return vcChange(id, entity, v, "delete", nil) }

func TestVersionedChangesOldUpdateNeverRestoresAfterNewerDelete(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		batches []vcBatchCase
		want    vcStored
	}{{
		name: "replayed old update in a later batch",
		batches: []vcBatchCase{
			{rows: []vcRow{vcUp("c1", "a", 1, "x")}, outcomes: []string{ocAccepted}},
			{rows: []vcRow{vcDel("c2", "a", 3)}, outcomes: []string{ocAccepted}},
			{rows: []vcRow{vcUp("c1", "a", 1, "x"), vcUp("c3", "a", 2, "y")}, outcomes: []string{ocSuperseded, ocStale}},
		},
		want: vcStored{Entity: "a", Version: 3, Status: stDeleted},
	}, {
		name: "old update and newer delete in one batch, either order",
		batches: []vcBatchCase{
			{rows: []vcRow{vcDel("c2", "a", 3), vcUp("c1", "a", 2, "x")}, outcomes: []string{ocAccepted, ocSuperseded}},
			{rows: []vcRow{vcUp("c1", "a", 2, "x"), vcDel("c2", "a", 3)}, outcomes: []string{ocSuperseded, ocDuplicate}},
		},
		want: vcStored{Entity: "a", Version: 3, Status: stDeleted},
	}, {
		name: "the whole history replayed under a new id",
		batches: []vcBatchCase{
			{rows: []vcRow{vcUp("c1", "a", 1, "x"), vcUp("c2", "a", 2, "y")}, outcomes: []string{ocSuperseded, ocAccepted}},
			{rows: []vcRow{vcDel("c3", "a", 4)}, outcomes: []string{ocAccepted}},
			{rows: []vcRow{vcUp("c1", "a", 1, "x"), vcUp("c2", "a", 2, "y")}, outcomes: []string{ocSuperseded, ocStale}},
		},
		want: vcStored{Entity: "a", Version: 4, Status: stDeleted},
	}, {
		name: "an update at the delete's own version is a conflict, not a restore",
		batches: []vcBatchCase{
			{rows: []vcRow{vcDel("c1", "a", 3)}, outcomes: []string{ocAccepted}},
			{rows: []vcRow{vcUp("c2", "a", 3, "x")}, outcomes: []string{ocConflict}},
		},
		want: vcStored{Entity: "a", Version: 3, Status: stConflict},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newVCEnv(t)
			e.applyExpect(tc.batches...)
			require.Equal(t, tc.want.String(), e.stored("a").String())
			require.False(t, e.isActive("a"), "the entity is back in the active view")
		})
	}
}

func TestVersionedChangesConflictClearedOnlyByStrictlyNewerVersion(t *testing.T) {
	t.Parallel()
	// Two ways into a conflict at version 2.
	starts := map[string][]vcBatchCase{
		"distinct payloads in one batch": {
			{rows: []vcRow{vcUp("c1", "a", 2, "red"), vcUp("c2", "a", 2, "blue")}, outcomes: []string{ocConflict, ocConflict}},
		},
		"a payload against the stored one": {
			{rows: []vcRow{vcUp("c1", "a", 2, "red")}, outcomes: []string{ocAccepted}},
			{rows: []vcRow{vcUp("c2", "a", 2, "blue")}, outcomes: []string{ocConflict}},
		},
	}
	conflict := vcStored{Entity: "a", Version: 2, Status: stConflict}
	for name, start := range starts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newVCEnv(t)
			e.applyExpect(start...)
			require.Equal(t, conflict.String(), e.stored("a").String())
			require.False(t, e.isActive("a"))

			// Replaying either payload, both, a delete at the same
			// version, or an older version keeps the conflict.
			for _, b := range []vcBatchCase{
				{rows: []vcRow{vcUp("c1", "a", 2, "red")}, outcomes: []string{ocConflict}},
				{rows: []vcRow{vcUp("c2", "a", 2, "blue")}, outcomes: []string{ocConflict}},
				{rows: []vcRow{vcUp("c2", "a", 2, "blue"), vcUp("c1", "a", 2, "red")}, outcomes: []string{ocConflict, ocConflict}},
				{rows: []vcRow{vcUp("c1", "a", 2, "red"), vcUp("c1", "a", 2, "red")}, outcomes: []string{ocConflict, ocConflict}},
				{rows: []vcRow{vcDel("c3", "a", 2)}, outcomes: []string{ocConflict}},
				{rows: []vcRow{vcUp("c4", "a", 1, "green")}, outcomes: []string{ocStale}},
			} {
				e.applyExpect(b)
				require.Equal(t, conflict.String(), e.stored("a").String(), "after %s", b.rows)
				require.False(t, e.isActive("a"))
			}

			// A strictly newer version clears it.
			e.applyExpect(vcBatchCase{rows: []vcRow{vcUp("c5", "a", 3, "green")}, outcomes: []string{ocAccepted}})
			require.Equal(t, vcStored{Entity: "a", Version: 3, Status: stActive, Value: vcStrp("green")}.String(), e.stored("a").String())
			require.True(t, e.isActive("a"))
		})
	}
}

func TestVersionedChangesDeleteOfUnknownEntityKeepsTombstone(t *testing.T) {
	t.Parallel()
	e := newVCEnv(t)
	e.applyExpect(vcBatchCase{rows: []vcRow{vcDel("c1", "ghost", 5)}, outcomes: []string{ocAccepted}})
	tomb := vcStored{Entity: "ghost", Version: 5, Status: stDeleted}
	require.Equal(t, []string{tomb.String()}, vcStringsOf(e.state()))
	require.Empty(t, e.active())

	// The tombstone keeps the version that rejects a later stale update.
	e.applyExpect(
		vcBatchCase{rows: []vcRow{vcUp("c2", "ghost", 4, "late")}, outcomes: []string{ocStale}},
		vcBatchCase{rows: []vcRow{vcDel("c1", "ghost", 5)}, outcomes: []string{ocDuplicate}},
	)
	require.Equal(t, []string{tomb.String()}, vcStringsOf(e.state()))
	require.Empty(t, e.active())

	e.applyExpect(vcBatchCase{rows: []vcRow{vcUp("c3", "ghost", 6, "alive")}, outcomes: []string{ocAccepted}})
	require.Equal(t, []string{vcStored{Entity: "ghost", Version: 6, Status: stActive, Value: vcStrp("alive")}.String()}, vcStringsOf(e.active()))
}

func TestVersionedChangesEmptyBatch(t *testing.T) {
	t.Parallel()
	for name, data := range map[string]string{"empty file": "", "blank line": "\n"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newVCEnv(t)
			e.applyRows("first", vcUp("c1", "a", 1, "x"))
			res := e.mustApply(e.file("jsonl", []byte(data)), "empty")
			require.Equal(t, int64(0), res.RowsIn)
			require.Empty(t, res.Outcomes)
			require.Equal(t, int64(2), res.Snapshot)
			require.Equal(t, []string{vcStored{Entity: "a", Version: 1, Status: stActive, Value: vcStrp("x")}.String()}, vcStringsOf(e.state()))
		})
	}
}

// vcFormatBatch exercises every outcome but erased with values each format
// can carry: versions are integers or null (Parquet's column is BIGINT), and
// blank and empty strings are quoted in CSV.
var vcFormatBatch = []vcRow{
	vcUp("f1", "a", 3, "new"),                             // accepted over a1
	vcUp("f2", "a", 2, "older"),                           // superseded_in_batch
	vcUp("f3", "b", 1, "b1"),                              // duplicate
	vcUp("f4", "c", 1, "late"),                            // stale under a tombstone
	vcUp("f5", "d", 2, "red"), vcUp("f6", "d", 2, "blue"), // conflict
	vcUp("f7", "e", 1, ""), vcUp("f7", "e", 1, ""), // accepted empty value, exact repeat
	vcDel("f8", "ghost", 4),                                          // accepted tombstone of an unknown entity
	vcUp("  ", "a", 9, "x"), {"null", `"a"`, "1", `"upsert"`, `"x"`}, // invalid_change_id
	vcUp("f9", " \t", 1, "x"), {`"f10"`, "null", "1", `"upsert"`, `"x"`}, // invalid_entity_id
	vcUp("f11", "a", 0, "x"), vcUp("f12", "a", -4, "x"), {`"f13"`, `"a"`, "null", `"upsert"`, `"x"`}, // invalid_version
	{`"f14"`, `"a"`, "1", `"Upsert"`, `"x"`}, {`"f15"`, `"a"`, "1", "null", `"x"`}, // invalid_operation
	{`"f16"`, `"a"`, "5", `"upsert"`, "null"}, {`"f17"`, `"a"`, "5", `"delete"`, `""`}, // invalid_payload
}

// vcCSV renders rows as CSV: NULL as an unquoted empty field, every string
// quoted (so "" is the empty string and spaces survive).
func vcCSV(rows []vcRow) []byte {
	var b strings.Builder
	b.WriteString(strings.Join(vcColumns[:], ",") + "\n")
	for _, r := range rows {
		for i, p := range r.text() {
			if i > 0 {
				b.WriteByte(',')
			}
			if p != nil {
				b.WriteString(`"` + strings.ReplaceAll(*p, `"`, `""`) + `"`)
			}
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

func TestVersionedChangesFormats(t *testing.T) {
	t.Parallel()
	base := []vcRow{vcUp("a1", "a", 1, "old"), vcUp("b1", "b", 1, "b1"), vcDel("c1", "c", 2)}
	formats := []struct {
		name, ext string
		write     func(e *vcEnv) string
	}{
		{"jsonl", "jsonl", func(e *vcEnv) string { return e.file("jsonl", vcJSONL(vcFormatBatch)) }},
		{"csv", "csv", func(e *vcEnv) string { return e.file("csv", vcCSV(vcFormatBatch)) }},
		{"parquet with a BIGINT version", "parquet", func(e *vcEnv) string {
			return e.parquet(vcJSONL(vcFormatBatch), "CAST(source_version AS BIGINT)")
		}},
		{"parquet of text columns", "parquet", func(e *vcEnv) string {
			return e.parquet(vcJSONL(vcFormatBatch), "source_version")
		}},
	}
	type result struct {
		outcomes, state []string
		counts          map[string]int64
	}
	results := make([]result, len(formats))
	for i, f := range formats {
		e := newVCEnv(t)
		e.applyRows("base", base...)
		res := e.mustApply(f.write(e), "batch")
		results[i] = result{vcStringsOf(e.outcomes("batch")), vcStringsOf(e.state()), res.Outcomes}
	}
	texts := vcRowTexts(vcFormatBatch)
	before := vcModel{}.fold(vcRowTexts(base))
	labels, after := before.batchOutcomes(texts)
	for _, o := range []string{ocInvalidChangeID, ocInvalidEntityID, ocInvalidVersion, ocInvalidOp, ocInvalidPayload,
		ocSuperseded, ocAccepted, ocStale, ocDuplicate, ocConflict} {
		require.Contains(t, labels, o, "the batch must exercise %s", o)
	}
	require.Equal(t, vcCountOutcomes(labels), results[0].counts, "jsonl against the model")
	require.Equal(t, vcStringsOf(after.rows()), results[0].state, "jsonl against the model")
	for i, f := range formats[1:] {
		require.Equal(t, results[0].outcomes, results[i+1].outcomes, "%s outcomes differ from jsonl", f.name)
		require.Equal(t, results[0].state, results[i+1].state, "%s target differs from jsonl", f.name)
		require.Equal(t, results[0].counts, results[i+1].counts, "%s counts differ from jsonl", f.name)
	}
}

func vcRowTexts(rows []vcRow) []vcText {
	out := make([]vcText, len(rows))
	for i, r := range rows {
		out[i] = r.text()
	}
	return out
}

// parquet writes JSON Lines data as a Parquet file through DuckDB, with
// version as the SQL expression of the source_version column.
func (e *vcEnv) parquet(jsonl []byte, version string) string {
	e.t.Helper()
	src := e.file("jsonl", jsonl)
	dst := strings.TrimSuffix(src, ".jsonl") + ".parquet"
	_, err := e.db.SQL().ExecContext(context.Background(), fmt.Sprintf(`COPY (
		SELECT change_id, entity_id, %s AS source_version, operation, value
		FROM read_json(%s, format = 'newline_delimited', columns = {
			change_id: 'VARCHAR', entity_id: 'VARCHAR', source_version: 'VARCHAR', operation: 'VARCHAR', value: 'VARCHAR'})
	) TO %s (FORMAT parquet)`, version, vcSQLLiteral(src), vcSQLLiteral(dst)))
	require.NoError(e.t, err)
	return dst
}

func vcSQLLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
