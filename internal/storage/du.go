package storage

import (
	"context"
	"io/fs"
	"net/url"
	"path/filepath"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/env"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
)

// DUEstimate names how idem du estimates table bytes (catalog.ReadStorage).
const DUEstimate = "pragma_storage_info: column segments by block offset, checkpointed data only"

// DUResult is the storage report of one job (idem du).
// WarehouseBytes is a published table's folder in an Iceberg warehouse
// and the bytes of its files.
type WarehouseBytes struct {
	Location string `json:"location"`
	Bytes    int64  `json:"bytes"`
	Files    int    `json:"files"`
}

// warehouseBytes counts the files of j's Iceberg table in its file://
// warehouse (the SQL catalog's default location); nil when the job does
// not publish or its warehouse is not a local folder.
func warehouseBytes(j *job.Job, table string) *WarehouseBytes {
	ice := j.Publish.Iceberg
	if ice == nil {
		return nil
	}
	u, err := url.Parse(ice.Warehouse)
	if err != nil || u.Scheme != "file" {
		return nil
	}
	w := &WarehouseBytes{Location: filepath.Join(u.Path, ice.Namespace+".db", table)}
	_ = filepath.WalkDir(w.Location, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				w.Bytes += fi.Size()
				w.Files++
			}
		}
		return nil
	})
	return w
}

// EnvBytes is one environment of a database and its bytes.
type EnvBytes struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

type DUResult struct {
	Job      string `json:"job"`
	Database string `json:"database"`
	// FileBytes is the database file and its WAL on disk; UsedBytes and
	// FreeBytes are DuckDB's used and free blocks of the file (freed
	// blocks are reused before the file grows).
	FileBytes int64 `json:"file_bytes"`
	// Environments are the database's environments (idem run --env
	// NAME) and the bytes of each, beside the database file.
	Environments []EnvBytes `json:"environments"`
	// Iceberg, for a job with [publish.iceberg] and a file:// warehouse,
	// is its table's folder there (<warehouse>/<namespace>.db/<table>,
	// data and metadata) and the bytes under it.
	Iceberg   *WarehouseBytes `json:"iceberg,omitempty"`
	UsedBytes int64           `json:"used_bytes"`
	FreeBytes int64           `json:"free_bytes"`
	// TablesBytes is the estimate summed over every table of the
	// database, to hold against UsedBytes: the difference is DuckDB's
	// metadata and the estimate's error.
	TablesBytes int64  `json:"tables_bytes"`
	Estimate    string `json:"estimate"`
	Latest      int64  `json:"latest"`
	// OldestKept is the job's oldest readable snapshot; KeepSnapshots its
	// [retention] keep_snapshots (0: none).
	OldestKept    int64   `json:"oldest_kept"`
	KeepSnapshots int64   `json:"keep_snapshots"`
	Bytes         DUBytes `json:"bytes"`
	Rows          DURows  `json:"rows"`
	InputFiles    int64   `json:"input_files"`
	// TombstonesInTarget says the pipeline keeps its tombstones as target
	// rows (status 'deleted'): Bytes.Tombstones is their share of
	// Bytes.Target, not counted twice in Bytes.Total.
	TombstonesInTarget bool `json:"tombstones_in_target"`
	// Snapshots are the kept snapshots below the latest, each with what
	// expiring it (and every older one) would free.
	Snapshots []DUSnapshot `json:"snapshots"`
	// Pins are the holds downstream jobs have on the job's kept snapshots
	// (DownstreamPins): expiry keeps each pinned snapshot.
	Pins []history.Pin `json:"pins"`
}

// DUBytes are the bytes of what a job keeps.
type DUBytes struct {
	Target      int64 `json:"target"`
	History     int64 `json:"history"`
	Outcomes    int64 `json:"outcomes"`
	Tombstones  int64 `json:"tombstones"`
	Inputs      int64 `json:"retained_inputs"`
	Checkpoints int64 `json:"checkpoints"`
	Total       int64 `json:"total"`
}

// DURows are the row counts of a job's tables.
type DURows struct {
	Target     int64 `json:"target"`
	History    int64 `json:"history"`
	Outcomes   int64 `json:"outcomes"`
	Tombstones int64 `json:"tombstones"`
}

// DUSnapshot is what `idem expire` would free if snapshot S were the last
// to expire (the oldest kept becoming S+1): the history rows visible only
// up to S, the outcome rows of batches up to S and the retained inputs no
// kept snapshot's rerun would need; bytes estimated from each table's
// bytes per row. A downstream job's pin may hold expiry back (see
// ExpireResult.HeldBy).
type DUSnapshot struct {
	Snapshot    int64 `json:"snapshot"`
	FreesBytes  int64 `json:"frees_bytes"`
	HistoryRows int64 `json:"history_rows"`
	OutcomeRows int64 `json:"outcome_rows"`
	Inputs      int   `json:"inputs"`
	InputBytes  int64 `json:"input_bytes"`
	// HeldBy are the pins (DUResult.Pins) on this snapshot or an older
	// kept one: while they hold, expiry stops below them and frees none
	// of this.
	HeldBy []history.Pin `json:"held_by,omitempty"`
}

// DU reports the storage of job j in the database d: bytes of its target,
// history, outcomes, tombstones, retained inputs and checkpoints, and for
// each kept snapshot what expiring it would free. It only reads.
func DU(ctx context.Context, d *run.DB, j *job.Job) (*DUResult, error) {
	q := d.SQL()
	st, err := catalog.ReadState(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	ret, err := catalog.ReadRetention(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	stor, err := catalog.ReadStorage(ctx, q)
	if err != nil {
		return nil, err
	}
	res := &DUResult{Job: j.Name, Database: d.Path(), Estimate: DUEstimate, Latest: st.Snapshot,
		OldestKept: ret.OldestKept, KeepSnapshots: j.Retention.KeepSnapshots, Snapshots: []DUSnapshot{}, Pins: []history.Pin{},
		UsedBytes: stor.UsedBlocks * stor.BlockSize, FreeBytes: stor.FreeBlocks * stor.BlockSize}
	for _, n := range stor.Tables {
		res.TablesBytes += n
	}
	res.FileBytes = env.DatabaseBytes(d.Path()) // env.go
	res.Environments = []EnvBytes{}
	if envs, err := env.ListEnvironments(d.Path()); err == nil {
		for _, e := range envs {
			res.Environments = append(res.Environments, EnvBytes{Name: e.Name, Bytes: env.EnvironmentBytes(d.Path(), e.Name)})
		}
	}
	table := j.Table
	if st.Target != "" {
		table = st.Target
	}
	res.Iceberg = warehouseBytes(j, table)
	outTable := history.OutcomesTable(j)
	b, r := &res.Bytes, &res.Rows
	b.Target = stor.TableBytes("main", table)
	b.History = stor.TableBytes("idem", j.Name+"__history")
	if outTable != "" {
		b.Outcomes = stor.TableBytes("main", outTable)
	}
	if r.Target, err = catalog.CountQualified(ctx, q, "main", table); err != nil {
		return nil, err
	}
	if r.History, err = catalog.CountQualified(ctx, q, "idem", j.Name+"__history"); err != nil {
		return nil, err
	}
	if outTable != "" {
		if r.Outcomes, err = catalog.CountQualified(ctx, q, "main", outTable); err != nil {
			return nil, err
		}
	}
	tomb := table + "_tombstones"
	if ok, err := catalog.TableExists(ctx, q, "main", tomb); err != nil {
		return nil, err
	} else if ok {
		b.Tombstones = stor.TableBytes("main", tomb)
		if r.Tombstones, err = catalog.CountQualified(ctx, q, "main", tomb); err != nil {
			return nil, err
		}
	} else if c := j.Pipeline.ConflictColumn; c != "" && r.Target > 0 {
		res.TombstonesInTarget = true
		if r.Tombstones, err = catalog.CountWhere(ctx, q, table, c, "deleted"); err != nil {
			return nil, err
		}
		b.Tombstones = b.Target * r.Tombstones / r.Target
	}
	if res.InputFiles, b.Inputs, err = catalog.JobInputBytes(ctx, q, j.Name); err != nil {
		return nil, err
	}
	if b.Checkpoints, err = catalog.CheckpointBytes(ctx, q, j.Name); err != nil {
		return nil, err
	}
	b.Total = b.Target + b.History + b.Outcomes + b.Inputs + b.Checkpoints
	if !res.TombstonesInTarget {
		b.Total += b.Tombstones
	}
	if st.Snapshot == 0 {
		return res, nil
	}
	pins, err := history.DownstreamPins(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	for _, p := range pins {
		if p.Snapshot >= ret.OldestKept {
			res.Pins = append(res.Pins, p)
		}
	}
	if res.Snapshots, err = expiryFrees(ctx, q, j, st.Snapshot, ret, res); err != nil {
		return nil, err
	}
	return res, nil
}

// expiryFrees is, for each kept snapshot S below the latest, what expiring
// through S would free.
func expiryFrees(ctx context.Context, q catalog.Querier, j *job.Job, latest int64, ret catalog.Retention, res *DUResult) ([]DUSnapshot, error) {
	snaps, err := catalog.ReadSnapshots(ctx, q, j.Name, latest)
	if err != nil {
		return nil, err
	}
	closed, err := catalog.ClosedHistoryRows(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	outcomes, err := catalog.OutcomeRowsBySnapshot(ctx, q, j.Name, history.OutcomesTable(j))
	if err != nil {
		return nil, err
	}
	elsewhere, err := catalog.InputsNamedElsewhere(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	sizes, err := catalog.RetainedInputSizes(ctx, q)
	if err != nil {
		return nil, err
	}
	perRow := func(bytes, rows, n int64) int64 {
		if rows == 0 {
			return 0
		}
		return bytes * n / rows
	}
	cps, err := catalog.Checkpoints(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	needed := history.NeededFrom(j, snaps, cps)
	out := []DUSnapshot{}
	for s := ret.OldestKept; s < latest; s++ {
		e := DUSnapshot{Snapshot: s}
		for c, n := range closed {
			if c <= s+1 {
				e.HistoryRows += n
			}
		}
		for b, n := range outcomes {
			if b <= s {
				e.OutcomeRows += n
			}
		}
		from := max(needed(s+1), ret.InputsFrom)
		forget, bytes := history.ExpirableInputs(snaps, from, elsewhere, sizes)
		e.Inputs, e.InputBytes = len(forget), bytes
		e.FreesBytes = perRow(res.Bytes.History, res.Rows.History, e.HistoryRows) +
			perRow(res.Bytes.Outcomes, res.Rows.Outcomes, e.OutcomeRows) + e.InputBytes
		for _, p := range res.Pins {
			if p.Snapshot <= s {
				e.HeldBy = append(e.HeldBy, p)
			}
		}
		out = append(out, e)
	}
	return out, nil
}
