// An apply job's snapshot published as row-level changes: the rows that
// are new or changed appended, the keys of the rows changed or removed
// written as an equality delete file, in one Iceberg snapshot (an append
// when nothing is deleted), rather than the whole table rewritten.

package publisher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/idem-dev/idem/runner"
)

// deltaOver says snapshot s can be published as row-level changes over
// prev, the idem snapshot the table holds: an apply job, unpartitioned,
// with a key that is the table's identifier, prev kept with the same
// columns, and a table whose format has delete files (v2).
func (p *publisher) deltaOver(tbl *table.Table, s *runner.KeptSnapshot, prev int64, idem *idemSide) bool {
	if p.j.Mode != runner.ModeApply || !tbl.Spec().IsUnpartitioned() || len(s.Key) == 0 || tbl.Metadata().Version() < 2 {
		return false
	}
	i := slices.IndexFunc(idem.kept, func(r *runner.KeptSnapshot) bool { return r.Snapshot == prev })
	if i < 0 || !slices.Equal(idem.kept[i].Columns, s.Columns) || !slices.Equal(idem.kept[i].Key, s.Key) {
		return false
	}
	ids := tbl.Schema().IdentifierFieldIDs
	return len(ids) == len(s.Key) && ids != nil
}

// delta is what writeDelta wrote: the data file of the new and changed
// rows and the equality delete file of the keys changed or removed (nil
// when there are none).
type delta struct {
	data, deletes     iceberg.DataFile
	dataRows, deleted int64
	bytes             int64
}

func (d *delta) files() int {
	n := 0
	for _, f := range []iceberg.DataFile{d.data, d.deletes} {
		if f != nil {
			n++
		}
	}
	return n
}

// writeDelta writes snapshot s as its changes over prev (deltaOver).
func (p *publisher) writeDelta(ctx context.Context, tbl *table.Table, s, prev int64, cols []column, schema *iceberg.Schema, keys []string) (*delta, error) {
	ids, err := fieldIDs(cols, schema)
	if err != nil {
		return nil, err
	}
	var keyCols []column
	for _, k := range keys {
		i := slices.IndexFunc(cols, func(c column) bool { return c.name == k })
		if i < 0 {
			return nil, fmt.Errorf("key column %s of %s is not a column of snapshot %d", k, p.j.Name, s)
		}
		keyCols = append(keyCols, cols[i])
	}
	keyIDs, err := fieldIDs(keyCols, schema)
	if err != nil {
		return nil, err
	}
	tx, err := p.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	now, err := tx.Table(ctx, s)
	if err != nil {
		return nil, err
	}
	before, err := tx.Table(ctx, prev)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = runner.QuoteIdent(c.name)
	}
	list := strings.Join(names, ", ")
	// Rows are compared whole: a row of s not in prev is new or changed;
	// a row of prev not in s is changed or removed, and its key deleted.
	added := "(SELECT " + list + " FROM (" + now.Query + ")) EXCEPT ALL (SELECT " + list + " FROM (" + before.Query + "))"
	gone := "(SELECT " + list + " FROM (" + before.Query + ")) EXCEPT ALL (SELECT " + list + " FROM (" + now.Query + "))"
	st, err := p.newStaging(tbl)
	if err != nil {
		return nil, err
	}
	defer st.close()
	tag := fmt.Sprintf("idem-s%d-%s", s, uuid.NewString())
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	d := &delta{}
	write := func(cs []column, from, ids, name string) (string, int64, int64, error) {
		sel := make([]string, len(cs))
		for i, c := range cs {
			sel[i] = c.writeSQL()
		}
		path := filepath.Join(st.dir, name)
		r, err := tx.Tx().ExecContext(ctx, "COPY (SELECT "+strings.Join(sel, ", ")+" FROM ("+from+")) TO "+runner.QuoteString(path)+" (FORMAT parquet, COMPRESSION zstd, FIELD_IDS "+ids+")")
		if err != nil {
			return "", 0, 0, fmt.Errorf("write the changes of snapshot %d of %s as Parquet: %w", s, p.j.Name, runner.TrimSQLError(err))
		}
		rows, _ := r.RowsAffected()
		if rows == 0 {
			return "", 0, 0, os.Remove(path)
		}
		info, err := os.Stat(path)
		if err != nil {
			return "", 0, 0, err
		}
		u, err := st.place(ctx, path)
		return u, rows, info.Size(), err
	}
	path, rows, size, err := write(cols, added, ids, tag+".parquet")
	if err != nil {
		return nil, err
	}
	if rows > 0 {
		if d.data, err = table.FileToDataFile(ctx, fs, path, schema, *iceberg.UnpartitionedSpec, 0, tbl.Properties()); err != nil {
			return nil, fmt.Errorf("add the changes of snapshot %d of %s: %w", s, p.j.Name, err)
		}
		d.dataRows, d.bytes = rows, size
	}
	keyList := make([]string, len(keyCols))
	for i, c := range keyCols {
		keyList[i] = runner.QuoteIdent(c.name)
	}
	path, rows, size, err = write(keyCols, "SELECT DISTINCT "+strings.Join(keyList, ", ")+" FROM ("+gone+")", keyIDs, tag+"-deletes.parquet")
	if err != nil {
		return nil, err
	}
	if rows > 0 {
		b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentEqDeletes, path, iceberg.ParquetFile, nil, nil, nil, rows, size)
		if err != nil {
			return nil, err
		}
		d.deletes = b.EqualityFieldIDs(schema.IdentifierFieldIDs).Build()
		d.deleted, d.bytes = rows, d.bytes+size
	}
	return d, nil
}

// stageDelta stages d in tx as one Iceberg snapshot: an append of its
// data file when it deletes nothing, a row delta otherwise, an empty
// append when nothing changed.
func stageDelta(ctx context.Context, tx *table.Transaction, d *delta, props iceberg.Properties) error {
	switch {
	case d.deletes == nil && d.data == nil:
		return tx.AddFiles(ctx, nil, props, false)
	case d.deletes == nil:
		return tx.AddDataFiles(ctx, []iceberg.DataFile{d.data}, props)
	}
	rd := tx.NewRowDelta(props).AddDeletes(d.deletes)
	if d.data != nil {
		rd.AddRows(d.data)
	}
	return rd.Commit(ctx)
}
