package source

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/lake"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
)

// Iceberg is the input of a job with [input] iceberg: an Apache Iceberg
// table read at one of its snapshots (package lake reads it). Its identity
// in the job key is the table's UUID and the snapshot id, so a run over an
// unchanged lake snapshot is skipped (or, for an apply job, already
// committed) and plan shows when the lake moved. The snapshot read is
// recorded with the idem snapshot (Resolved.StreamID, IcebergPin), so that
// a rerun reads exactly it, or is refused when the lake expired it.
//
// With read = "appends" (an apply job) a run reads the rows appended since
// the lake snapshot its last batch reached: that snapshot is a position in
// idem.positions, read inside the run's transaction and committed with
// the batch's rows, so each appended row is applied exactly once.
type Iceberg struct {
	Job   *job.Job
	Store lake.Store
	// Pin, when set, reads this recorded snapshot rather than the
	// current one (a rerun): a table whose UUID differs, or that no
	// longer holds the snapshot, is refused.
	Pin *IcebergPin
	// After, for a rerun of an appends read, is the lake snapshot the
	// batch before it reached (nil: it was the first): the replay reads
	// the rows appended after it, whatever position the scratch database
	// holds (a checkpoint does not keep positions).
	After *int64

	scan *lake.Scan
	pin  IcebergPin
}

// IcebergPin is the lake snapshot a run read: table UUID and snapshot id
// (-1 for a table with none), recorded in the idem snapshot's inputs as
// "iceberg:<uuid>:<snapshot id>". IdemSnapshot names the idem snapshot
// that recorded it, for messages.
type IcebergPin struct {
	Table        string
	Snapshot     int64
	IdemSnapshot int64
}

// String is the recorded form of the pin.
func (p IcebergPin) String() string {
	return "iceberg:" + p.Table + ":" + strconv.FormatInt(p.Snapshot, 10)
}

// ParseIcebergPin reads a recorded pin; ok is false for another input's
// stream identity.
func ParseIcebergPin(s string) (p IcebergPin, ok bool) {
	rest, found := strings.CutPrefix(s, "iceberg:")
	if !found {
		return p, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return p, false
	}
	id, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil {
		return p, false
	}
	return IcebergPin{Table: rest[:i], Snapshot: id}, true
}

// Kind is "iceberg".
func (ic *Iceberg) Kind() string { return "iceberg" }

// position is the idem.positions partition of an appends read of table.
func icebergPosition(table string) string { return "iceberg:" + table }

// Resolve reads the table's metadata and plans the read of its current
// snapshot (or of Pin).
func (ic *Iceberg) Resolve(ctx context.Context) (*Resolved, error) {
	spec := ic.Job.Input.Iceberg
	if ic.Store == nil {
		ic.Store = lake.NewStores(nil)
	}
	m, err := ReadIcebergMetadata(ctx, ic.Store, spec)
	if err != nil {
		return nil, err
	}
	s := m.Current()
	if p := ic.Pin; p != nil {
		if m.TableUUID != p.Table {
			return nil, report.Refuse("lake", "snapshot %d of %s read Iceberg table %s; %s is now table %s: cannot read what it read",
				p.IdemSnapshot, ic.Job.Name, p.Table, m.File, m.TableUUID)
		}
		s = nil
		if p.Snapshot != -1 {
			if s = m.Snapshot(p.Snapshot); s == nil {
				return nil, report.Refuse("lake", "snapshot %d of %s read Iceberg snapshot %d of table %s, which the table no longer holds (expired; its metadata %s lists %s): cannot rebuild it",
					p.IdemSnapshot, ic.Job.Name, p.Snapshot, p.Table, m.File, snapshotList(m))
			}
		}
	}
	sc, err := lake.Plan(ctx, ic.Store, m, s)
	if err != nil {
		return nil, err
	}
	ic.scan = sc
	ic.pin = IcebergPin{Table: m.TableUUID, Snapshot: -1}
	if s != nil {
		ic.pin.Snapshot = s.ID
	}
	id := map[string]any{"table_uuid": m.TableUUID, "snapshot_id": ic.pin.Snapshot}
	if spec.Read == job.IcebergReadAppends {
		id["read"] = spec.Read
	}
	r := &Resolved{Format: job.FormatIceberg, Digest: pipeline.DigestString(string(jobkey.CanonicalJSON(map[string]any{"iceberg": id}))),
		StreamID: ic.pin.String(), BatchID: "iceberg-" + strconv.FormatInt(ic.pin.Snapshot, 10)}
	if spec.Read == job.IcebergReadAppends {
		r.Positions = map[string]int64{icebergPosition(m.TableUUID): ic.pin.Snapshot}
	}
	return r, nil
}

// snapshotList names the snapshots metadata m holds, for messages.
func snapshotList(m *lake.Metadata) string {
	if len(m.Snapshots) == 0 {
		return "none"
	}
	ids := make([]string, len(m.Snapshots))
	for i, s := range m.Snapshots {
		ids[i] = strconv.FormatInt(s.ID, 10)
	}
	return strings.Join(ids, ", ")
}

// ReadIcebergMetadata reads the newest metadata of the table spec names.
func ReadIcebergMetadata(ctx context.Context, st lake.Store, spec *job.IcebergSpec) (*lake.Metadata, error) {
	loc := spec.Metadata
	var err error
	switch {
	case spec.Catalog != "":
		if loc, err = lake.CatalogMetadata(ctx, spec.Catalog, spec.CatalogName, spec.Table); err != nil {
			return nil, err
		}
	case spec.Location != "":
		if loc, err = lake.LatestMetadata(ctx, st, spec.Location); err != nil {
			return nil, err
		}
	}
	return lake.ReadMetadata(ctx, st, loc)
}

// Stage creates view input over the planned snapshot: the pipeline's
// columns, read by field id, less the rows deleted by delete files. An
// appends read takes only the data files the snapshots after the committed
// position added, refusing a gap it cannot bridge.
func (ic *Iceberg) Stage(ctx context.Context, tx *sql.Tx, r *Resolved) (*Staged, error) {
	j, sc := ic.Job, ic.scan
	cols := j.Pipeline.ColumnNames()
	label := "iceberg table " + ic.pin.Table
	ignored, err := checkColumns(label, sc.Schema.Names(), cols, j.Input.ExtraColumns == job.ExtraIgnore)
	if err != nil {
		return nil, err
	}
	for i, c := range ignored {
		ignored[i] = label + ": " + c
	}
	if j.Input.Iceberg.Read == job.IcebergReadAppends {
		empty, err := ic.appended(ctx, tx)
		if err != nil || empty {
			return &Staged{Empty: empty}, err
		}
	}
	if err := sc.CheckFieldIDs(ctx, tx, ic.Store); err != nil {
		return nil, err
	}
	q, err := sc.Query(ctx, ic.Store, cols)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP VIEW input AS "+q); err != nil {
		return nil, fmt.Errorf("stage %s snapshot %d: %w", label, ic.pin.Snapshot, err)
	}
	return &Staged{IgnoredColumns: ignored}, nil
}

// appended narrows the scan to the data files added after the lake
// snapshot committed as the job's position (read in tx). Every snapshot
// between must be an append: rows overwritten or deleted since cannot be
// fed as appends, and are refused.
func (ic *Iceberg) appended(ctx context.Context, tx *sql.Tx) (empty bool, err error) {
	sc := ic.scan
	pos, err := catalog.ReadPositions(ctx, tx, ic.Job.Name)
	if err != nil {
		return false, err
	}
	for k, v := range pos {
		if t, ok := strings.CutPrefix(k, "iceberg:"); ok && t != ic.pin.Table {
			return false, report.Refuse("lake", "job %s applied the rows appended to Iceberg table %s up to its snapshot %d; the table read now is table %s: a new table's rows are not appends to the old one's",
				ic.Job.Name, t, v, ic.pin.Table)
		}
	}
	from, ok := pos[icebergPosition(ic.pin.Table)]
	if ic.Pin != nil {
		from, ok = 0, ic.After != nil
		if ok {
			from = *ic.After
		}
	}
	if !ok {
		return false, nil // the first batch: everything up to the snapshot
	}
	if from == ic.pin.Snapshot {
		return true, nil
	}
	m := sc.Metadata
	chain, found := m.Ancestors(ic.pin.Snapshot, from)
	if from == -1 && len(chain) > 0 {
		// The batch before read the table with no snapshot yet: every
		// snapshot since is after it, back to the table's first.
		found = chain[len(chain)-1].Parent == nil
	}
	if !found {
		return false, report.Refuse("lake", "job %s reached Iceberg snapshot %d of table %s, which is not an ancestor of snapshot %d that the table holds now (expired, or the table was rolled back): the rows appended since cannot be known; read = %q reads the whole table",
			ic.Job.Name, from, ic.pin.Table, ic.pin.Snapshot, job.IcebergReadSnapshot)
	}
	added := map[int64]bool{}
	for _, s := range chain {
		if op := s.Operation(); op != "append" {
			return false, report.Refuse("lake", "Iceberg snapshot %d of table %s is a %q, not an append: rows were changed or removed since snapshot %d that job %s reached, and read = %q feeds appended rows only; read = %q reads the whole table",
				s.ID, ic.pin.Table, op, from, ic.Job.Name, job.IcebergReadAppends, job.IcebergReadSnapshot)
		}
		added[s.ID] = true
	}
	var data []lake.File
	for _, f := range sc.Data {
		if added[f.Snapshot] {
			data = append(data, f)
		}
	}
	sc.Data = data
	return false, nil
}
