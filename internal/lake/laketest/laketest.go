// Package laketest writes small Apache Iceberg tables (format v2) for
// tests: a table folder with metadata/vN.metadata.json and
// version-hint.text, Avro manifest lists and manifests, and Parquet data
// and delete files written by DuckDB with Iceberg field ids. It writes
// what idem's reader (package lake) reads and what the Iceberg spec says,
// nothing more; the publish/iceberg module cross-checks the reader on
// tables iceberg-go wrote.
package laketest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/twmb/avro"
	"github.com/twmb/avro/ocf"
)

// Column is a column of a test table: an Iceberg primitive type.
type Column struct {
	ID   int
	Name string
	Type string // long, string, int, double, ...
}

// Table is a test table being written.
type Table struct {
	Dir     string
	UUID    string
	Columns []Column
	// PartitionBy names an identity-partitioned string column ("" for none).
	PartitionBy string
	// PlainFiles writes data files without Iceberg field ids (a plain
	// Parquet file added to a table).
	PlainFiles bool

	db        *sql.DB
	version   int
	seq       int64
	nextID    int64
	current   int64
	snapshots []map[string]any
	manifests []manifest // live manifests of the current snapshot
	nfile     int
	schemas   []map[string]any
	schemaID  int
}

type manifest struct {
	Path     string
	Content  int32
	Sequence int64
	Snapshot int64
	Length   int64
}

// New starts a table in dir (created), with columns, using db (DuckDB) to
// write Parquet. It writes v1.metadata.json, a table with no snapshot.
func New(db *sql.DB, dir, uuid string, columns []Column) (*Table, error) {
	if err := os.MkdirAll(filepath.Join(dir, "metadata"), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	t := &Table{Dir: dir, UUID: uuid, Columns: columns, db: db, nextID: 1000, current: -1}
	t.addSchema()
	return t, t.writeMetadata()
}

// Evolve sets a new current schema (ids decide what is the same column:
// a new name for an old id is a rename) and writes new metadata.
func (t *Table) Evolve(columns []Column) error {
	t.Columns = columns
	t.addSchema()
	return t.writeMetadata()
}

func (t *Table) addSchema() {
	fields := make([]map[string]any, len(t.Columns))
	for i, c := range t.Columns {
		fields[i] = map[string]any{"id": c.ID, "name": c.Name, "required": false, "type": c.Type}
	}
	t.schemaID = len(t.schemas)
	t.schemas = append(t.schemas, map[string]any{"type": "struct", "schema-id": t.schemaID, "fields": fields})
}

// URL is the file:// location of a path of the table.
func (t *Table) URL(rel string) string {
	abs, _ := filepath.Abs(filepath.Join(t.Dir, rel))
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}

// Snapshot is the current snapshot id (-1 for none).
func (t *Table) Snapshot() int64 { return t.current }

// Append writes the rows of query (columns named as the table's) as one
// data file per partition value and commits them as an append snapshot.
func (t *Table) Append(ctx context.Context, query string) (int64, error) {
	return t.commit(ctx, "append", func(snap, seq int64) ([]entry, error) {
		return t.dataFiles(ctx, query, snap, seq)
	})
}

// DeletePositions commits a position delete file deleting rows pos (from
// 0) of data file n (1 for the first data file the table wrote).
func (t *Table) DeletePositions(ctx context.Context, n int, pos ...int64) (int64, error) {
	return t.commit(ctx, "delete", func(snap, seq int64) ([]entry, error) {
		target := t.URL(fmt.Sprintf("data/%05d.parquet", n))
		var rows []string
		for _, p := range pos {
			rows = append(rows, fmt.Sprintf("(%s, %d::BIGINT)", lit(target), p))
		}
		q := "SELECT * FROM (VALUES " + strings.Join(rows, ", ") + ") v(file_path, pos)"
		rel := t.nextFile()
		err := t.copy(ctx, q, rel, "{file_path: 2147483546, pos: 2147483545}")
		return []entry{{path: t.URL(rel), content: 1, count: int64(len(pos)), snap: snap, seq: seq}}, err
	})
}

// DeleteEqual commits an equality delete file over the columns named (the
// rows of query, columns named as the table's).
func (t *Table) DeleteEqual(ctx context.Context, query string, columns ...string) (int64, error) {
	return t.commit(ctx, "delete", func(snap, seq int64) ([]entry, error) {
		var ids []int32
		var fid []string
		for _, name := range columns {
			for _, c := range t.Columns {
				if c.Name == name {
					ids = append(ids, int32(c.ID))
					fid = append(fid, quote(c.Name)+": "+strconv.Itoa(c.ID))
				}
			}
		}
		e := entry{content: 2, count: 1, snap: snap, seq: seq, eq: ids}
		if t.PartitionBy != "" {
			// The delete file of a partitioned table is of one partition:
			// the query's value of the partition column.
			var v string
			if err := t.db.QueryRowContext(ctx, "SELECT any_value("+quote(t.PartitionBy)+") FROM ("+query+")").Scan(&v); err != nil {
				return nil, err
			}
			e.partition = map[string]any{t.PartitionBy: v}
			query = "SELECT * EXCLUDE (" + quote(t.PartitionBy) + ") FROM (" + query + ")"
		}
		rel := t.nextFile()
		e.path = t.URL(rel)
		return []entry{e}, t.copy(ctx, query, rel, "{"+strings.Join(fid, ", ")+"}")
	})
}

// Expire removes snapshot id from the table's metadata, as Iceberg's
// expire_snapshots does: its child keeps naming it as parent, and its
// files are left (a reader must not need them).
func (t *Table) Expire(id int64) error {
	var kept []map[string]any
	for _, s := range t.snapshots {
		if s["snapshot-id"].(int64) != id {
			kept = append(kept, s)
		}
	}
	t.snapshots = kept
	return t.writeMetadata()
}

type entry struct {
	path      string
	content   int32
	count     int64
	snap, seq int64
	eq        []int32
	partition map[string]any
}

func (t *Table) nextFile() string {
	t.nfile++
	return fmt.Sprintf("data/%05d.parquet", t.nfile)
}

func (t *Table) fieldIDs() string {
	if t.PlainFiles {
		return "{}"
	}
	var ids []string
	for _, c := range t.Columns {
		ids = append(ids, quote(c.Name)+": "+strconv.Itoa(c.ID))
	}
	return "{" + strings.Join(ids, ", ") + "}"
}

func (t *Table) copy(ctx context.Context, query, rel, fieldIDs string) error {
	ids := ", FIELD_IDS " + fieldIDs
	if fieldIDs == "{}" {
		ids = ""
	}
	_, err := t.db.ExecContext(ctx, "COPY ("+query+") TO "+lit(filepath.Join(t.Dir, rel))+" (FORMAT parquet"+ids+")")
	return err
}

func (t *Table) dataFiles(ctx context.Context, query string, snap, seq int64) ([]entry, error) {
	if t.PartitionBy == "" {
		rel := t.nextFile()
		if err := t.copy(ctx, query, rel, t.fieldIDs()); err != nil {
			return nil, err
		}
		return []entry{{path: t.URL(rel), content: 0, count: t.count(ctx, rel), snap: snap, seq: seq}}, nil
	}
	rows, err := t.db.QueryContext(ctx, "SELECT DISTINCT "+quote(t.PartitionBy)+" FROM ("+query+") ORDER BY 1")
	if err != nil {
		return nil, err
	}
	var values []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		values = append(values, v)
	}
	rows.Close()
	var out []entry
	for _, v := range values {
		rel := t.nextFile()
		if err := t.copy(ctx, "SELECT * FROM ("+query+") WHERE "+quote(t.PartitionBy)+" = "+lit(v), rel, t.fieldIDs()); err != nil {
			return nil, err
		}
		out = append(out, entry{path: t.URL(rel), count: t.count(ctx, rel), snap: snap, seq: seq, partition: map[string]any{t.PartitionBy: v}})
	}
	return out, nil
}

func (t *Table) count(ctx context.Context, rel string) int64 {
	var n int64
	_ = t.db.QueryRowContext(ctx, "SELECT count(*) FROM read_parquet("+lit(filepath.Join(t.Dir, rel))+")").Scan(&n)
	return n
}

// commit writes the files files makes as a new manifest, a manifest list
// of it and every live manifest, and new metadata whose current snapshot
// is the new one.
func (t *Table) commit(ctx context.Context, op string, files func(snap, seq int64) ([]entry, error)) (int64, error) {
	t.nextID += 7
	snap, seq := t.nextID*1000003, t.seq+1
	es, err := files(snap, seq)
	if err != nil {
		return 0, err
	}
	t.seq = seq
	content := int32(0)
	if len(es) > 0 && es[0].content != 0 {
		content = 1
	}
	mpath := filepath.Join(t.Dir, "metadata", fmt.Sprintf("m-%d.avro", snap))
	if err := writeManifest(mpath, es, t.PartitionBy); err != nil {
		return 0, err
	}
	st, _ := os.Stat(mpath)
	t.manifests = append(t.manifests, manifest{Path: t.URL("metadata/" + filepath.Base(mpath)), Content: content, Sequence: seq, Snapshot: snap, Length: st.Size()})
	lpath := filepath.Join(t.Dir, "metadata", fmt.Sprintf("snap-%d.avro", snap))
	if err := writeList(lpath, t.manifests); err != nil {
		return 0, err
	}
	s := map[string]any{"snapshot-id": snap, "sequence-number": seq, "timestamp-ms": int64(1700000000000) + seq,
		"manifest-list": t.URL("metadata/" + filepath.Base(lpath)), "summary": map[string]any{"operation": op}, "schema-id": t.schemaID}
	if t.current != -1 {
		s["parent-snapshot-id"] = t.current
	}
	t.snapshots = append(t.snapshots, s)
	t.current = snap
	return snap, t.writeMetadata()
}

func (t *Table) writeMetadata() error {
	t.version++
	spec := map[string]any{"spec-id": 0, "fields": []any{}}
	if t.PartitionBy != "" {
		for _, c := range t.Columns {
			if c.Name == t.PartitionBy {
				spec["fields"] = []any{map[string]any{"name": c.Name, "transform": "identity", "source-id": c.ID, "field-id": 1000}}
			}
		}
	}
	m := map[string]any{
		"format-version": 2, "table-uuid": t.UUID, "location": t.URL(""), "last-sequence-number": t.seq,
		"last-updated-ms": int64(1700000000000) + int64(t.version), "last-column-id": 100,
		"current-schema-id": t.schemaID, "schemas": t.schemas,
		"default-spec-id": 0, "partition-specs": []any{spec}, "last-partition-id": 1000,
		"current-snapshot-id": t.current, "snapshots": t.snapshots,
		"properties": map[string]any{}, "sort-orders": []any{map[string]any{"order-id": 0, "fields": []any{}}}, "default-sort-order-id": 0,
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(t.Dir, "metadata", fmt.Sprintf("v%d.metadata.json", t.version)), data, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(t.Dir, "metadata", "version-hint.text"), []byte(strconv.Itoa(t.version)), 0o644)
}

// MetadataFile is the path of the newest metadata file.
func (t *Table) MetadataFile() string {
	return filepath.Join(t.Dir, "metadata", fmt.Sprintf("v%d.metadata.json", t.version))
}

const listSchema = `{"type":"record","name":"manifest_file","fields":[
 {"name":"manifest_path","type":"string"},
 {"name":"manifest_length","type":"long"},
 {"name":"partition_spec_id","type":"int"},
 {"name":"content","type":"int"},
 {"name":"sequence_number","type":"long"},
 {"name":"min_sequence_number","type":"long"},
 {"name":"added_snapshot_id","type":"long"}]}`

func writeList(path string, ms []manifest) error {
	recs := make([]map[string]any, len(ms))
	for i, m := range ms {
		recs[i] = map[string]any{"manifest_path": m.Path, "manifest_length": m.Length, "partition_spec_id": int32(0), "content": m.Content,
			"sequence_number": m.Sequence, "min_sequence_number": m.Sequence, "added_snapshot_id": m.Snapshot}
	}
	return writeAvro(path, listSchema, recs)
}

func writeManifest(path string, es []entry, partitionBy string) error {
	partFields := "[]"
	if partitionBy != "" {
		partFields = `[{"name":` + strconv.Quote(partitionBy) + `,"type":["null","string"],"default":null}]`
	}
	schema := `{"type":"record","name":"manifest_entry","fields":[
 {"name":"status","type":"int"},
 {"name":"snapshot_id","type":["null","long"],"default":null},
 {"name":"sequence_number","type":["null","long"],"default":null},
 {"name":"file_sequence_number","type":["null","long"],"default":null},
 {"name":"data_file","type":{"type":"record","name":"r2","fields":[
  {"name":"content","type":"int"},
  {"name":"file_path","type":"string"},
  {"name":"file_format","type":"string"},
  {"name":"partition","type":{"type":"record","name":"r102","fields":` + partFields + `}},
  {"name":"record_count","type":"long"},
  {"name":"file_size_in_bytes","type":"long"},
  {"name":"equality_ids","type":["null",{"type":"array","items":"int"}],"default":null}]}}]}`
	recs := make([]map[string]any, len(es))
	for i, e := range es {
		part := map[string]any{}
		for k, v := range e.partition {
			part[k] = v
		}
		var eq any
		if e.eq != nil {
			eq = e.eq
		}
		// Sequence numbers are left null: a reader inherits the manifest's.
		recs[i] = map[string]any{"status": int32(1), "snapshot_id": e.snap, "sequence_number": nil, "file_sequence_number": nil,
			"data_file": map[string]any{"content": e.content, "file_path": e.path, "file_format": "PARQUET", "partition": part,
				"record_count": e.count, "file_size_in_bytes": int64(0), "equality_ids": eq}}
	}
	return writeAvro(path, schema, recs)
}

func writeAvro(path, schema string, recs []map[string]any) error {
	s, err := avro.Parse(schema)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := ocf.NewWriter(f, s)
	if err != nil {
		f.Close()
		return err
	}
	for _, r := range recs {
		if err := w.Encode(r); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func lit(s string) string   { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
