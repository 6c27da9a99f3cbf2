package run

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
)

// writeCommitRows writes the ledger row (apply), the snapshot row, the state
// row and the run log row, all inside the run's transaction, after the run
// log rows this handle deferred (runlog.go). cols are the target's columns
// as the run left them.
func (d *DB) writeCommitRows(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, st catalog.State, res *Result, opts RunOptions, cols []catalog.TargetColumn) error {
	if err := d.deferred.writeIn(ctx, tx); err != nil {
		return err
	}
	outcomes := string(jobkey.CanonicalJSON(res.Outcomes))
	if j.Pipeline.Mode == pipeline.ModeApply {
		from, to := bounds(opts, p.chunk)
		if err := catalog.InsertLedger(ctx, tx, catalog.NewBatch{Job: j.Name, BatchID: p.batchID, Digest: p.digest, InputDigest: p.parts.Input,
			From: from, To: to, RowsIn: res.RowsIn, Outcomes: outcomes, Snapshot: res.Snapshot}); err != nil {
			return err
		}
	}
	inputs := make([]map[string]any, len(p.files))
	for i, f := range p.files {
		inputs[i] = map[string]any{"sha256": f.SHA256, "bytes": f.Size, "name": filepath.Base(f.Path)}
	}
	from, to := bounds(opts, p.chunk)
	bounds := map[string]any{"from": from, "to": to}
	recorded := map[string]any{"files": inputs, "format": p.format, "bounds": bounds}
	if p.parts.Partitions != nil {
		recorded["partitions"] = p.parts.Partitions // a rerun replays --partitions
	}
	if j.IsModel() && j.Incremental != "" {
		recorded["incremental"] = j.Incremental // a rerun replays this load alone
	}
	note := opts.Note
	if up, ok := p.input.(*source.Upstream); ok {
		if names, why := up.Realigned(); len(names) > 0 {
			recorded["realigned"] = names // a rerun realigns the same way
			note = strings.TrimPrefix(note+"; "+why, "; ")
			res.Note = why
		}
	}
	if n := auditNote(res.Audits); n != "" {
		note = strings.TrimPrefix(note+"; "+n, "; ")
	}
	if p.in.StreamID != "" {
		recorded["stream_id"] = p.in.StreamID
	}
	if rejects := p.rejects(opts); len(rejects) > 0 {
		recorded["rejects"] = rejects // a rerun tags the same rows
	}
	if err := catalog.InsertSnapshot(ctx, tx, catalog.NewSnapshot{
		Job: j.Name, Snapshot: res.Snapshot, Parent: st.Snapshot, Kind: res.Decision, BatchID: p.batchID,
		JobKey: p.key, Parts: p.parts.JSON(),
		Inputs: string(jobkey.CanonicalJSON(recorded)),
		RowsIn: res.RowsIn, RowsOut: res.RowsOut, Outcomes: outcomes,
		Columns: string(jobkey.CanonicalJSON(cols)), KeyColumns: string(jobkey.CanonicalJSON(report.NonNil(j.Pipeline.Key))),
		Packet: res.packet,
	}); err != nil {
		return err
	}
	if err := catalog.WriteState(ctx, tx, j, p.key, p.parts.JSON(), res.Snapshot, res.Cursor, st.Epoch); err != nil {
		return err
	}
	changed := res.Changed
	if res.FirstLoad {
		changed = []string{}
	}
	if err := catalog.InsertRun(ctx, tx, catalog.RunRow{Job: j.Name, BatchID: p.batchID, Decision: res.Decision,
		Changed: string(jobkey.CanonicalJSON(changed)), RowsIn: res.RowsIn, Outcomes: outcomes,
		Snapshot: res.Snapshot, Cursor: res.Cursor, Epoch: st.Epoch, Message: note, Commit: true}); err != nil {
		return fmt.Errorf("write run log: %w", err)
	}
	if p.in.Positions != nil {
		// A stream batch's positions commit with its rows (stream.go).
		if err := catalog.WritePositions(ctx, tx, j.Name, p.in.Positions, res.Snapshot); err != nil {
			return err
		}
	}
	return recordFiles(ctx, tx, j, p, res) // files.go
}

// bounds are the ledger's from and to of a run: --from/--to, or a chunk's
// watermark range.
func bounds(o RunOptions, c *source.Chunk) (from, to any) {
	if c != nil {
		if c.From != nil {
			from = *c.From
		}
		if c.To != nil {
			to = *c.To
		}
		return from, to
	}
	if o.From != nil {
		from, to = *o.From, *o.To
	}
	return from, to
}
