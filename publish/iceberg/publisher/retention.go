// Erasure and retention carried to Iceberg: the kept history rebuilt
// from the scrubbed idem data, older Iceberg snapshots expired and the
// files no snapshot names deleted.

package publisher

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// rebuild carries an idem erasure over: in ONE commit it publishes every
// kept idem snapshot again (read from idem, which no longer holds the
// subject) and expires every Iceberg snapshot that existed before, so
// that no snapshot the table keeps can read the subject; the files only
// those held are deleted after the commit. The new snapshots form a chain
// of their own (the first has no parent and removes nothing), so no
// manifest the table keeps has an entry, not even a DELETED one with its
// partition tuple and bounds, for a file that held the subject.
func (p *publisher) rebuild(ctx context.Context, tbl *table.Table, idem *idemSide) (*table.Table, error) {
	detached, err := detach(tbl, p.cat)
	if err != nil {
		return nil, fmt.Errorf("rebuild Iceberg table %s: %w", strings.Join(Ident(p.j), "."), err)
	}
	tx := detached.NewTransaction()
	if err := tx.AssertRefSnapshotID(""); err != nil {
		return nil, err
	}
	// old maps each idem snapshot to the Iceberg snapshot that held it
	// before: the erasure rewrites them.
	old := map[int64]int64{}
	var olds []int64
	for _, sn := range tbl.Metadata().Snapshots() {
		olds = append(olds, sn.SnapshotID)
		if sn.Summary == nil {
			continue
		}
		if v, err := strconv.ParseInt(sn.Summary.Properties[PropSnapshot], 10, 64); err == nil {
			old[v] = sn.SnapshotID
		}
	}
	var remove []string
	staged := detached
	var pubs []Published
	for _, s := range idem.kept {
		start := time.Now()
		cols, schema, notes, err := p.evolve(tx, staged, s)
		if err != nil {
			return nil, err
		}
		files, err := p.writeFiles(ctx, staged, s.Snapshot, cols, schema, p.j.PartitionBy != "" && !tbl.Spec().IsUnpartitioned(), nil)
		if err != nil {
			return nil, err
		}
		p.opts.fault(FaultAfterFiles)
		sum, rows, err := p.exportSHA(ctx, s.Snapshot)
		if err != nil {
			return nil, err
		}
		props := snapshotProps(p.j, idem, s, sum)
		props[PropErasure] = strconv.FormatInt(idem.lastErasure, 10)
		if err := stageFiles(ctx, tx, remove, files.paths, props); err != nil {
			return nil, fmt.Errorf("publish snapshot %d of %s again after the erasure: %w", s.Snapshot, p.j.Name, err)
		}
		pubs = append(pubs, Published{Snapshot: s.Snapshot, Rewrote: old[s.Snapshot], Rows: rows, SHA256: sum, Files: len(files.paths), Bytes: files.bytes, Removed: len(remove), Notes: notes, Seconds: time.Since(start).Seconds()})
		remove = files.paths
		if staged, err = stagedTable(tx); err != nil {
			return nil, err
		}
	}
	if err := tx.SetProperties(iceberg.Properties{PropErasure: strconv.FormatInt(idem.lastErasure, 10)}); err != nil {
		return nil, err
	}
	// Keep exactly the snapshots staged above; everything older expires.
	time.Sleep(2 * time.Millisecond) // snapshots younger than 0 ms are never expired
	if err := tx.ExpireSnapshots(table.WithRetainLast(len(idem.kept)), table.WithOlderThan(0), table.WithPostCommit(false)); err != nil {
		return nil, fmt.Errorf("expire the Iceberg snapshots of %s that held the erased rows: %w", p.j.Name, err)
	}
	p.opts.fault(FaultBeforeCommit)
	out, err := p.commit(ctx, tx)
	if err != nil {
		return nil, err
	}
	p.opts.fault(FaultAfterCommit)
	if out, err = p.cat.LoadTable(ctx, Ident(p.j)); err != nil { // out commits through detach's catalog
		return nil, fmt.Errorf("load Iceberg table %s: %w", strings.Join(Ident(p.j), "."), err)
	}
	p.rep.Rebuilt = true
	meta := out.Metadata()
	lookup := func(id int64) *table.Snapshot { return meta.SnapshotByID(id) }
	chain := table.AncestorsOf(out.CurrentSnapshot().SnapshotID, lookup)
	for i := range pubs { // chain is newest first
		pubs[i].IcebergSnapshot = chain[len(pubs)-1-i].SnapshotID
		p.rep.Published = append(p.rep.Published, pubs[i])
		if p.opts.Progress != nil {
			p.opts.Progress(pubs[i])
		}
	}
	for _, id := range olds {
		if meta.SnapshotByID(id) == nil {
			p.rep.Expired = append(p.rep.Expired, id)
		}
	}
	return out, nil
}

// detach is tbl without its main branch, committing to cat: a
// transaction on it stages a chain of snapshots from none, and its commit
// is guarded by tbl's main snapshot (as AssertRefSnapshotID guards
// a transaction on tbl), so that a publisher that committed meanwhile
// wins and this one is refused.
func detach(tbl *table.Table, cat table.CatalogIO) (*table.Table, error) {
	b, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err != nil {
		return nil, err
	}
	if err := b.RemoveSnapshotRef(table.MainBranch); err != nil {
		return nil, err
	}
	meta, err := b.Build()
	if err != nil {
		return nil, err
	}
	var main *int64
	if s := tbl.CurrentSnapshot(); s != nil {
		main = &s.SnapshotID
	}
	return table.New(tbl.Identifier(), meta, tbl.MetadataLocation(), tbl.FS, detachedCatalog{cat: cat, main: main}), nil
}

// detachedCatalog commits a detached table's transaction: its requirement
// on the main branch (absent in the detached table) becomes one on the
// main snapshot the table had when it was detached.
type detachedCatalog struct {
	cat  table.CatalogIO
	main *int64
}

func (d detachedCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	return d.cat.LoadTable(ctx, ident)
}

func (d detachedCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	out := make([]table.Requirement, 0, len(reqs)+1)
	for _, r := range reqs {
		if r.GetType() != "assert-ref-snapshot-id" {
			out = append(out, r)
		}
	}
	out = append(out, table.AssertRefSnapshotID(table.MainBranch, d.main))
	return d.cat.CommitTable(ctx, ident, out, updates)
}

func stagedTable(tx *table.Transaction) (*table.Table, error) {
	st, err := tx.StagedTable()
	if err != nil {
		return nil, err
	}
	return st.Table, nil
}

// expire expires the Iceberg snapshots of idem snapshots that expired
// (their files are deleted by cleanOrphans, which also deletes what a
// killed publisher left, and does not fail on a file already gone):
// the table keeps the Iceberg snapshots of the kept idem snapshots (the
// newest ones of its main branch) and nothing older.
func (p *publisher) expire(ctx context.Context, tbl *table.Table, idem *idemSide) (*table.Table, error) {
	pub, err := readPublished(tbl)
	if err != nil {
		return nil, err
	}
	oldest := idem.kept[0].Snapshot
	keep := 0
	for _, id := range pub.order { // newest first
		if s, ok := pub.idemOf[id]; ok && s < oldest {
			break
		}
		keep++
	}
	all := len(tbl.Metadata().Snapshots())
	if keep >= all || keep == 0 {
		return tbl, nil
	}
	var expired []int64
	for _, id := range pub.order[keep:] {
		expired = append(expired, id)
	}
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(""); err != nil {
		return nil, err
	}
	if err := tx.ExpireSnapshots(table.WithRetainLast(keep), table.WithOlderThan(0), table.WithPostCommit(false)); err != nil {
		return nil, fmt.Errorf("expire Iceberg snapshots of %s: %w", p.j.Name, err)
	}
	out, err := p.commit(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, id := range expired {
		if out.Metadata().SnapshotByID(id) == nil {
			p.rep.Expired = append(p.rep.Expired, id)
		}
	}
	return out, nil
}

// cleanOrphans deletes the files under the table's location that no
// metadata references and that are older than since (the start of this
// publisher's commits): files of killed publishers and of expired
// snapshots. A concurrent publisher's files, written after since, are
// left alone.
func (p *publisher) cleanOrphans(ctx context.Context, tbl *table.Table, since time.Time) error {
	res, err := tbl.DeleteOrphanFiles(ctx, table.WithLocation(tbl.Location()), table.WithFilesOlderThan(time.Since(since)))
	if err != nil {
		return fmt.Errorf("delete orphan files of Iceberg table %s: %w", strings.Join(Ident(p.j), "."), err)
	}
	p.rep.Deleted += len(res.DeletedFiles)
	if remote(tbl) {
		return abortUploads(ctx, tbl, since)
	}
	return nil
}
