package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// packet writes the release packet of the snapshot this run commits
// (catalog.Packet), in the run's transaction, once the target holds it:
// one entry per partition the run touched, or one for the whole target of
// a job without partition_by.
//
// A touched partition's entry is complete: its rows are hashed written as
// a CSV export writes them, a cost in proportion to what the run replaced.
// The whole target's entry gets its row count and key bounds (a count and
// a min/max scan) and leaves its distinct keys, sha256 and bytes to be
// computed when asked (inspect.Show, from the snapshot's pinned rows): a
// count(DISTINCT) of the whole target is a hash of every key, and its CSV
// a sort and a write of every row, on every commit however small the
// change (12.8 s of an 18.9 s run of a 10M-row model, docs/benchmarks.md).
func (r *txRun) packet(ctx context.Context) (bool, error) {
	j, tx, res, p := r.j, r.tx, r.res, r.p
	done := r.opts.Progress.Start("release packet")
	defer done()
	cols, err := r.columns(ctx)
	if err != nil {
		return false, err
	}
	pk := &catalog.Packet{
		Job: j.Name, Snapshot: r.snapshot, Parent: r.st.Snapshot, JobKey: p.key, Parts: json.RawMessage(p.parts.JSON()),
		Pipeline: j.Pipeline.Name, TransformVersion: j.TransformVersion, SchemaVersion: j.SchemaVersion,
		Inputs: []catalog.InputRef{}, RowsIn: res.RowsIn, Outcomes: res.Outcomes, Key: report.NonNil(j.Pipeline.Key),
		PartitionBy: j.PartitionBy,
	}
	for _, f := range p.files {
		pk.Inputs = append(pk.Inputs, catalog.InputRef{SHA256: f.SHA256, Bytes: f.Size, Name: filepath.Base(f.Path)})
	}
	if r.part == nil {
		e, err := PacketFactsOf(ctx, tx, j, sqltext.QuoteIdent(j.Table), cols, nil, false)
		if err != nil {
			return false, err
		}
		e.Whole = true
		pk.Entries = []catalog.PacketEntry{*e}
	} else {
		dir, err := os.MkdirTemp("", "idem-packet-*")
		if err != nil {
			return false, fmt.Errorf("release packet: %w", err)
		}
		defer os.RemoveAll(dir)
		for i, v := range r.part.touched() {
			e, err := packetEntry(ctx, tx, j, cols, &v, filepath.Join(dir, fmt.Sprintf("%d.csv", i)))
			if err != nil {
				return false, err
			}
			e.Repaired = slices.Contains(r.part.repaired, v)
			pk.Entries = append(pk.Entries, *e)
		}
	}
	if pk.PayloadVersions, err = payloadVersions(ctx, tx, j); err != nil {
		return false, err
	}
	// Written with the snapshot row (writeCommitRows).
	res.packet, err = catalog.EncodePacket(pk)
	return true, err
}

// PacketEntryOf describes the rows of table (a temp table holding one
// snapshot's rows of job j, with columns cols) as the release packet of
// that snapshot describes its target, sha256 included: an erasure that
// rewrites a snapshot's rows rewrites its packet's entries with it.
func PacketEntryOf(ctx context.Context, tx *sql.Tx, j *job.Job, table string, cols []catalog.TargetColumn, partition *string, path string) (*catalog.PacketEntry, error) {
	at := *j
	at.Table = table
	return packetEntry(ctx, tx, &at, cols, partition, path)
}

// PacketFactsOf is PacketEntryOf without the sha256 and bytes (left
// pending, catalog.PacketEntry.Pending): the rows and bounds, and with
// distinct the distinct keys, of table's rows of one partition (nil: all
// of them). table is a quoted identifier or a parenthesized SELECT.
func PacketFactsOf(ctx context.Context, q catalog.Querier, j *job.Job, table string, cols []catalog.TargetColumn, partition *string, distinct bool) (*catalog.PacketEntry, error) {
	e, _, err := packetFacts(ctx, q, j, table, cols, partition, distinct)
	return e, err
}

// packetEntry describes the target's rows of one partition (value nil: all
// rows) and hashes them written as a CSV export writes them, to path.
func packetEntry(ctx context.Context, tx *sql.Tx, j *job.Job, cols []catalog.TargetColumn, value *string, path string) (*catalog.PacketEntry, error) {
	e, from, err := packetFacts(ctx, tx, j, sqltext.QuoteIdent(j.Table), cols, value, true)
	if err != nil {
		return nil, err
	}
	names, key := packetOrder(j, cols)
	query, err := catalog.CanonicalCSVQuery(ctx, tx, "SELECT "+identList(names)+from+" ORDER BY "+identList(key))
	if err != nil {
		return nil, fmt.Errorf("release packet of %s: %w", j.Table, err)
	}
	if _, err := tx.ExecContext(ctx, "COPY ("+query+") TO "+sqltext.SQLString(path)+" "+catalog.CSVCopyOptions); err != nil {
		return nil, fmt.Errorf("release packet of %s: %w", j.Table, catalog.TrimSQLError(err))
	}
	sum, size, err := source.FileSHA256(path)
	if err != nil {
		return nil, fmt.Errorf("release packet of %s: %w", j.Table, err)
	}
	e.SHA256, e.Bytes = sum, size
	return e, nil
}

// packetOrder is the columns an entry's rows are written with and the
// key they are ordered by: the export's total order
// (export.TableSource.orderBy), the key or, without one, every column.
func packetOrder(j *job.Job, cols []catalog.TargetColumn) (names, key []string) {
	names = make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	key = j.Pipeline.Key
	if len(key) == 0 {
		key = names
	}
	return names, key
}

// packetFacts counts the rows of one partition (value nil: all rows) of
// table (quoted, or a parenthesized SELECT) and reads their bounds and,
// with distinct, their distinct keys, in one scan. It returns the entry,
// its sha256 pending, and the FROM clause that reads those rows.
func packetFacts(ctx context.Context, q catalog.Querier, j *job.Job, table string, cols []catalog.TargetColumn, value *string, distinct bool) (*catalog.PacketEntry, string, error) {
	_, key := packetOrder(j, cols)
	where := ""
	if value != nil {
		typ := ""
		for _, c := range cols {
			if c.Name == j.PartitionBy {
				typ = c.Type
			}
		}
		// The filter a partitioned export uses (export_partitioned.go).
		where = " WHERE " + sqltext.QuoteIdent(j.PartitionBy) + " = CAST(" + sqltext.SQLString(*value) + " AS " + typ + ")"
	}
	from := " FROM " + table + where
	keyExpr := sqltext.QuoteIdent(key[0])
	if len(key) > 1 {
		keyExpr = "row(" + identList(key) + ")"
	}
	bounded := slices.Clone(j.Pipeline.Key)
	if j.PartitionBy != "" && !slices.Contains(bounded, j.PartitionBy) {
		bounded = append(bounded, j.PartitionBy)
	}
	distinctExpr := "0"
	if distinct {
		distinctExpr = "count(DISTINCT " + keyExpr + ")"
	}
	sel := []string{"count(*)", distinctExpr}
	for _, c := range bounded {
		qc := sqltext.QuoteIdent(c)
		sel = append(sel, "CAST(min("+qc+") AS VARCHAR)", "CAST(max("+qc+") AS VARCHAR)")
	}
	e := &catalog.PacketEntry{Partition: value, Bounds: map[string][2]*string{}}
	dest := []any{&e.Rows, &e.DistinctKeys}
	bounds := make([]sql.NullString, 2*len(bounded))
	for i := range bounds {
		dest = append(dest, &bounds[i])
	}
	if err := q.QueryRowContext(ctx, "SELECT "+strings.Join(sel, ", ")+from).Scan(dest...); err != nil {
		return nil, "", fmt.Errorf("release packet of %s: %w", j.Table, catalog.TrimSQLError(err))
	}
	for i, c := range bounded {
		var b [2]*string
		for k := 0; k < 2; k++ {
			if bounds[2*i+k].Valid {
				s := bounds[2*i+k].String
				b[k] = &s
			}
		}
		e.Bounds[c] = b
	}
	return e, from, nil
}

// payloadVersions counts this run's input rows by payload schema version
// when the pipeline's outcomes table keeps one (a schema_version column):
// the rows of this batch for an apply pipeline. nil otherwise.
func payloadVersions(ctx context.Context, tx *sql.Tx, j *job.Job) (map[string]int64, error) {
	t := j.Pipeline.OutcomesTable
	if t == "" {
		return nil, nil
	}
	// The table exists: the balance phase counted this run's outcomes in
	// it. pragma_table_info looks the one table up, where duckdb_columns()
	// lists every column of the database (2.0-2.4 ms a batch of a
	// follower, growing with the database).
	cols, err := catalog.ExistingColumns(ctx, tx, "main", j.Table+t)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(cols, func(c catalog.TargetColumn) bool { return c.Name == "schema_version" }) {
		return nil, nil
	}
	q := "SELECT coalesce('v' || CAST(schema_version AS VARCHAR), 'none'), count(*) FROM " + sqltext.QuoteIdent(j.Table+t)
	if j.Pipeline.Mode == pipeline.ModeApply {
		q += " WHERE batch_id = getvariable('idem_batch_id')"
	}
	rows, err := tx.QueryContext(ctx, q+" GROUP BY 1 ORDER BY 1")
	if err != nil {
		return nil, fmt.Errorf("release packet: payload versions: %w", catalog.TrimSQLError(err))
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var v string
		var n int64
		if err := rows.Scan(&v, &n); err != nil {
			return nil, err
		}
		out[v] = n
	}
	return out, rows.Err()
}
