package publisher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/idem-dev/idem/runner"
)

// Summary and table properties idem writes.
const (
	// PropSnapshot is the idem snapshot an Iceberg snapshot holds.
	PropSnapshot = "idem.snapshot"
	// PropSHA256 is the sha256 of `idem export --snapshot S` (CSV).
	PropSHA256 = "idem.sha256"
	// PropJobKey is the job key of the idem snapshot.
	PropJobKey = "idem.job_key"
	// PropJob is the idem job's name.
	PropJob = "idem.job"
	// PropDatabase is the id of the idem database the snapshot was
	// published from (idem.commits): with the job key and the sha256 it
	// says which history a published snapshot belongs to.
	PropDatabase = "idem.database_id"
	// PropErasure (a table property and a summary property) is the last
	// idem erasure snapshot the table's history was rebuilt after.
	PropErasure = "idem.erasure"
)

// Fault points of a publication, for kill tests (IDEM_FAULT): the Parquet
// files of a snapshot are written and nothing is committed; the Iceberg
// metadata is about to be committed; it is committed and the expiry and
// orphan cleanup have not run.
const (
	FaultAfterFiles   = "publish_after_files"
	FaultBeforeCommit = "publish_before_commit"
	FaultAfterCommit  = "publish_after_commit"
	FaultAfterExpire  = "publish_after_expire"
	// FaultWhileHashing: the export of a snapshot is written, not yet
	// removed.
	FaultWhileHashing = "publish_while_hashing"
	// FaultMidUpload: a file's bytes are sent to the object store and
	// its upload is not completed.
	FaultMidUpload = "publish_mid_upload"
)

// Options say how Publish runs.
type Options struct {
	// Fault, when set, is called at each fault point (Fault*).
	Fault func(point string)
	// Progress, when set, is told of each snapshot published.
	Progress func(p Published)
	// Republish publishes every kept snapshot again, in one commit that
	// expires every Iceberg snapshot before it, even when the table holds
	// another history (a database restored from a backup or recreated
	// beside its table): the documented way out of ErrDiverged.
	Republish bool
}

func (o Options) fault(point string) {
	if o.Fault != nil {
		o.Fault(point)
	}
}

// Published reports one idem snapshot committed as an Iceberg snapshot.
type Published struct {
	Snapshot        int64 `json:"snapshot"`
	IcebergSnapshot int64 `json:"iceberg_snapshot"`
	// Rewrote is the Iceberg snapshot that held this idem snapshot before
	// an erasure published it again without the subject (and expired it).
	Rewrote    int64    `json:"rewrote_iceberg_snapshot,omitempty"`
	Rows       int64    `json:"rows"`
	SHA256     string   `json:"sha256"`
	Files      int      `json:"files_added"`
	Bytes      int64    `json:"bytes_added"`
	Removed    int      `json:"files_removed"`
	Partitions []string `json:"partitions,omitempty"` // the partitions replaced; empty: the whole table
	// Notes say what was published differently from idem's snapshot:
	// a column retyped in a way Iceberg cannot promote.
	Notes []string `json:"notes,omitempty"`
	// Operation is the Iceberg snapshot's: append (rows added only),
	// overwrite (files replaced, or rows deleted by an equality delete
	// file), delete.
	Operation string `json:"operation"`
	// Deleted counts the keys an equality delete file deletes (an apply
	// job published as row-level changes).
	Deleted int64   `json:"keys_deleted,omitempty"`
	Seconds float64 `json:"seconds"`
}

// Report reports a catch-up.
type Report struct {
	Job   string `json:"job"`
	Table string `json:"table"`
	// Published are the snapshots committed, in order.
	Published []Published `json:"published"`
	// Already counts the kept idem snapshots the table held before.
	Already int `json:"already_published"`
	// Rebuilt says an erasure was carried over: every kept snapshot was
	// published again without the subject and the older Iceberg snapshots
	// expired.
	Rebuilt bool `json:"rebuilt_after_erasure"`
	// Republished says Options.Republish replaced the table's history.
	Republished bool `json:"republished,omitempty"`
	// Expired are the Iceberg snapshots expired (their idem snapshot
	// expired or erased), and Deleted the files deleted from the
	// warehouse with them or as orphans of killed publishers.
	Expired []int64 `json:"iceberg_snapshots_expired"`
	Deleted int     `json:"files_deleted"`
	Seconds float64 `json:"seconds"`
}

// idemSide is what the idem database holds of the job: its kept
// snapshots, in order, and its last erasure.
type idemSide struct {
	dbID        string
	kept        []*runner.KeptSnapshot
	lastErasure int64
}

func readIdem(ctx context.Context, db *runner.Reader) (*idemSide, error) {
	k, err := db.Snapshots(ctx)
	if err != nil {
		return nil, err
	}
	s := &idemSide{dbID: k.DatabaseID, lastErasure: k.LastErasure}
	for i := range k.Snapshots {
		s.kept = append(s.kept, &k.Snapshots[i])
	}
	return s, nil
}

// published maps the idem snapshots the table's main branch holds to
// their Iceberg snapshots, newest first as Iceberg lists ancestors.
type published struct {
	byIdem map[int64]int64
	order  []int64 // Iceberg snapshot ids, newest first
	idemOf map[int64]int64
	props  map[int64]iceberg.Properties // summary properties by Iceberg snapshot id
	max    int64
}

func readPublished(tbl *table.Table) (*published, error) {
	p := &published{byIdem: map[int64]int64{}, idemOf: map[int64]int64{}, props: map[int64]iceberg.Properties{}}
	if tbl == nil || tbl.CurrentSnapshot() == nil {
		return p, nil
	}
	meta := tbl.Metadata()
	lookup := func(id int64) *table.Snapshot { return meta.SnapshotByID(id) }
	for _, s := range table.AncestorsOf(tbl.CurrentSnapshot().SnapshotID, lookup) {
		p.order = append(p.order, s.SnapshotID)
		if s.Summary == nil {
			continue
		}
		v, ok := s.Summary.Properties[PropSnapshot]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("Iceberg snapshot %d: %s = %q is not a snapshot number", s.SnapshotID, PropSnapshot, v)
		}
		if _, dup := p.byIdem[n]; !dup { // newest first: a rebuilt snapshot wins
			p.byIdem[n] = s.SnapshotID
		}
		p.idemOf[s.SnapshotID] = n
		p.props[s.SnapshotID] = s.Summary.Properties
		p.max = max(p.max, n)
	}
	return p, nil
}

// publisher is one catch-up of one job.
type publisher struct {
	db   *runner.Reader
	j    *runner.JobInfo
	cat  *Catalog
	opts Options
	rep  *Report
}

// Publish catches up job j's Iceberg table with the idem database db: it
// commits, in order, one Iceberg snapshot for every kept idem snapshot the
// table does not hold (creating the namespace and table first). After an
// idem erasure it publishes every kept snapshot again, without the
// subject, in one commit that also expires every older Iceberg snapshot;
// Iceberg snapshots of expired idem snapshots are expired. Files no
// snapshot references any more are deleted. A commit refused because
// another publisher moved the table is ErrRefused (exit 3); what was
// committed before it stands.
func Publish(ctx context.Context, db *runner.Reader, j *runner.JobInfo, opts Options) (rep *Report, err error) {
	if j.Iceberg == nil {
		return nil, runner.Usage("%s declares no [publish.iceberg]", j.Name)
	}
	start := time.Now()
	rep = &Report{Job: j.Name, Table: strings.Join(Ident(j), "."), Published: []Published{}, Expired: []int64{}}
	defer func() { rep.Seconds = time.Since(start).Seconds() }()
	cat, err := OpenCatalog(ctx, j.Iceberg)
	if err != nil {
		return rep, err
	}
	defer cat.Close()
	p := &publisher{db: db, j: j, cat: cat, opts: opts, rep: rep}
	return rep, p.catchUp(ctx)
}

func (p *publisher) catchUp(ctx context.Context) error {
	idem, err := readIdem(ctx, p.db)
	if err != nil {
		return err
	}
	if len(idem.kept) == 0 {
		return nil
	}
	tbl, err := p.cat.loadTable(ctx, p.j)
	if err != nil {
		return err
	}
	if tbl == nil {
		if tbl, err = p.createTable(ctx, idem.kept[0]); err != nil {
			return err
		}
	}
	pub, err := readPublished(tbl)
	if err != nil {
		return err
	}
	if !p.opts.Republish {
		if err := p.checkHistory(idem, pub); err != nil {
			return err
		}
	}
	commitStart := time.Now()
	erasure := tbl.Properties().GetInt(PropErasure, 0)
	switch {
	case p.opts.Republish && len(pub.order) > 0:
		if tbl, err = p.rebuild(ctx, tbl, idem); err != nil {
			return err
		}
		p.rep.Rebuilt, p.rep.Republished = false, true
	case int64(erasure) < idem.lastErasure && len(pub.order) > 0:
		if tbl, err = p.rebuild(ctx, tbl, idem); err != nil {
			return err
		}
	default:
		for _, s := range idem.kept {
			if _, ok := pub.byIdem[s.Snapshot]; ok {
				p.rep.Already++
				continue
			}
			if s.Snapshot < pub.max {
				continue // older than what the table holds: skipped for good (an expiry gap)
			}
			prev := pub.max
			if tbl, err = p.publishOne(ctx, tbl, s, prev, idem); err != nil {
				return err
			}
			pub.max = s.Snapshot
		}
		if idem.lastErasure > int64(erasure) {
			// The table was empty when the erasure came: nothing holds it.
			// Record it so no rebuild follows.
			tx := tbl.NewTransaction()
			if err := errors.Join(tx.AssertRefSnapshotID(""), tx.SetProperties(iceberg.Properties{PropErasure: strconv.FormatInt(idem.lastErasure, 10)})); err != nil {
				return err
			}
			if tbl, err = p.commit(ctx, tx); err != nil {
				return err
			}
		}
	}
	if tbl, err = p.expire(ctx, tbl, idem); err != nil {
		return err
	}
	p.opts.fault(FaultAfterExpire)
	return p.cleanOrphans(ctx, tbl, commitStart)
}

// ErrDiverged is the refusal of a table published from another history
// than the database's (exit 3).
var ErrDiverged = errors.New("the Iceberg table holds another history")

// checkHistory refuses (ErrDiverged, exit 3) a table that holds a
// snapshot this database does not have, or whose published snapshot of a
// number this database keeps names another job key or database id: a
// database restored from a backup or recreated beside its table, that
// moved on differently. Publishing on top of it would mix two histories.
func (p *publisher) checkHistory(idem *idemSide, pub *published) error {
	latest := idem.kept[len(idem.kept)-1]
	table := strings.Join(Ident(p.j), ".")
	refuse := func(theirs string, ours string) error {
		return runner.Refuse("history", "%v: Iceberg table %s was published from another history than this database's (restored from a backup, or recreated beside its table?): the table holds %s, this database (id %s) %s; nothing was published. To publish this database's history in place of the table's, run: %s publish %s --republish",
			ErrDiverged, table, theirs, idem.dbID, ours, "idem-iceberg", p.j.File)
	}
	if pub.max > latest.Snapshot {
		id := pub.byIdem[pub.max]
		return refuse(describePublished(pub.max, pub.props[id]), fmt.Sprintf("ends at snapshot %d", latest.Snapshot))
	}
	for _, s := range idem.kept {
		id, ok := pub.byIdem[s.Snapshot]
		if !ok {
			continue
		}
		props := pub.props[id]
		db, hasDB := props[PropDatabase]
		if props[PropJobKey] != s.JobKey || (hasDB && db != idem.dbID) {
			return refuse(describePublished(s.Snapshot, props), fmt.Sprintf("has snapshot %d of job key %s", s.Snapshot, s.JobKey))
		}
	}
	return nil
}

// describePublished names a published snapshot's history for messages.
func describePublished(s int64, props iceberg.Properties) string {
	db := props[PropDatabase]
	if db == "" {
		db = "not recorded"
	}
	return fmt.Sprintf("idem snapshot %d of job key %s (database id %s, sha256 %s)", s, props[PropJobKey], db, props[PropSHA256])
}

// createTable creates the job's table with the columns of its first kept
// snapshot, partitioned by identity on [target] partition_by.
func (p *publisher) createTable(ctx context.Context, first *runner.KeptSnapshot) (*table.Table, error) {
	if err := p.cat.ensureNamespace(ctx, p.j); err != nil {
		return nil, err
	}
	// The key columns are required and the schema's identifier fields
	// (Flink and Spark upserts, equality deletes).
	fields := make([]iceberg.NestedField, len(first.Columns))
	var keyIDs []int
	for i, c := range first.Columns {
		col := columnOf(c)
		key := slices.Contains(first.Key, c.Name)
		fields[i] = iceberg.NestedField{ID: i + 1, Name: c.Name, Type: col.typ, Required: key}
		if key {
			keyIDs = append(keyIDs, i+1)
		}
	}
	schema := iceberg.NewSchemaWithIdentifiers(0, keyIDs, fields...)
	props := iceberg.Properties{
		// No column bounds in manifests: a manifest never keeps a copy of
		// a value (an erased subject) that outlives its data file.
		"write.metadata.metrics.default": "counts",
		PropJob:                          p.j.Name,
		// Data files are added by the publisher, never rewritten by a
		// reader's maintenance job behind idem's back.
		"gc.enabled": "true",
	}
	opts := []icecat.CreateTableOpt{icecat.WithProperties(props)}
	if p.j.PartitionBy != "" {
		if _, ok := schema.FindFieldByName(p.j.PartitionBy); ok {
			spec, err := iceberg.NewPartitionSpecOpts(iceberg.AddPartitionFieldByName(p.j.PartitionBy, p.j.PartitionBy, iceberg.IdentityTransform{}, schema, nil))
			if err != nil {
				return nil, fmt.Errorf("partition spec of %s: %w", p.j.Name, err)
			}
			props["write.metadata.metrics.column."+p.j.PartitionBy] = "full" // partition values come from the files' bounds
			opts = append(opts, icecat.WithPartitionSpec(&spec))
		}
	}
	tbl, err := p.cat.CreateTable(ctx, Ident(p.j), schema, opts...)
	if errors.Is(err, icecat.ErrTableAlreadyExists) {
		return p.cat.LoadTable(ctx, Ident(p.j)) // another publisher created it: the commits decide
	}
	if err != nil {
		return nil, fmt.Errorf("create Iceberg table %s: %w", strings.Join(Ident(p.j), "."), err)
	}
	return tbl, nil
}

// commit commits tx, turning a lost compare-and-swap into a refusal.
func (p *publisher) commit(ctx context.Context, tx *table.Transaction) (*table.Table, error) {
	tbl, err := tx.Commit(ctx)
	if err != nil {
		if errors.Is(err, table.ErrCommitFailed) || strings.Contains(err.Error(), "requirement failed") {
			return nil, runner.Refuse("parent", "Iceberg table %s changed while publishing %s (another publisher committed first); nothing of this commit was published: %v", strings.Join(Ident(p.j), "."), p.j.Name, err)
		}
		return nil, fmt.Errorf("commit to Iceberg table %s: %w", strings.Join(Ident(p.j), "."), err)
	}
	return tbl, nil
}

// snapshotProps are the summary properties of idem snapshot s of the
// database idem.
func snapshotProps(j *runner.JobInfo, idem *idemSide, s *runner.KeptSnapshot, sum string) iceberg.Properties {
	return iceberg.Properties{
		PropSnapshot: strconv.FormatInt(s.Snapshot, 10),
		PropSHA256:   sum,
		PropJobKey:   s.JobKey,
		PropJob:      j.Name,
		PropDatabase: idem.dbID,
	}
}

// publishOne commits idem snapshot s as one Iceberg snapshot whose parent
// is tbl's current one. prev is the idem snapshot tbl holds (0: none):
// a partitioned job whose prev is still kept replaces only the partitions
// whose rows differ.
func (p *publisher) publishOne(ctx context.Context, tbl *table.Table, s *runner.KeptSnapshot, prev int64, idem *idemSide) (*table.Table, error) {
	start := time.Now()
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(""); err != nil {
		return nil, err
	}
	cols, schema, notes, err := p.evolve(tx, tbl, s)
	if err != nil {
		return nil, err
	}
	pb := Published{Snapshot: s.Snapshot, Notes: notes, Operation: "overwrite"}
	var stage func(props iceberg.Properties) error
	if prev > 0 && len(notes) == 0 && p.deltaOver(tbl, s, prev, idem) {
		d, err := p.writeDelta(ctx, tbl, s.Snapshot, prev, cols, schema, s.Key)
		if err != nil {
			return nil, err
		}
		pb.Files, pb.Bytes, pb.Deleted = d.files(), d.bytes, d.deleted
		stage = func(props iceberg.Properties) error { return stageDelta(ctx, tx, d, props) }
	} else {
		current, err := currentFiles(ctx, tbl)
		if err != nil {
			return nil, err
		}
		var parts, remove []string
		partitioned := p.j.PartitionBy != "" && !tbl.Spec().IsUnpartitioned() && slices.ContainsFunc(cols, func(c column) bool { return c.name == p.j.PartitionBy })
		// Which partitions the table's files hold is read from the files
		// themselves, on this machine: an object store's are rewritten.
		if partitioned && prev > 0 && keptSnapshot(idem, prev) && len(notes) == 0 && !remote(tbl) {
			if parts, remove, err = p.changedPartitions(ctx, s.Snapshot, prev, current); err != nil {
				return nil, err
			}
		} else {
			remove = current
		}
		files, err := p.writeFiles(ctx, tbl, s.Snapshot, cols, schema, partitioned, parts)
		if err != nil {
			return nil, err
		}
		pb.Files, pb.Bytes, pb.Removed = len(files.paths), files.bytes, len(remove)
		if parts != nil {
			pb.Partitions = make([]string, len(parts))
			for i, v := range parts {
				pb.Partitions[i] = partName(v)
			}
		}
		stage = func(props iceberg.Properties) error { return stageFiles(ctx, tx, remove, files.paths, props) }
	}
	p.opts.fault(FaultAfterFiles)
	if pb.SHA256, pb.Rows, err = p.exportSHA(ctx, s.Snapshot); err != nil {
		return nil, err
	}
	if err := stage(snapshotProps(p.j, idem, s, pb.SHA256)); err != nil {
		return nil, fmt.Errorf("publish snapshot %d of %s: %w", s.Snapshot, p.j.Name, err)
	}
	p.opts.fault(FaultBeforeCommit)
	out, err := p.commit(ctx, tx)
	if err != nil {
		return nil, err
	}
	p.opts.fault(FaultAfterCommit)
	pb.IcebergSnapshot = out.CurrentSnapshot().SnapshotID
	if sum := out.CurrentSnapshot().Summary; sum != nil {
		pb.Operation = string(sum.Operation)
	}
	pb.Seconds = time.Since(start).Seconds()
	p.rep.Published = append(p.rep.Published, pb)
	if p.opts.Progress != nil {
		p.opts.Progress(pb)
	}
	return out, nil
}

func keptSnapshot(idem *idemSide, s int64) bool {
	return slices.ContainsFunc(idem.kept, func(r *runner.KeptSnapshot) bool { return r.Snapshot == s })
}

// evolve brings the staged schema of tx to the columns of snapshot s:
// added columns are added (optional), widened types promoted; a column s
// lacks stays in the table, null in s's files. A type change Iceberg
// cannot make (BOOLEAN to VARCHAR) drops the old Iceberg column and adds
// a new one of the same name (a new field id): the snapshots before s keep
// their schema and read the old column with its old type, s and later
// ones read the new column; notes say so. A partition column is never
// retyped so (its partition spec names it): that is an error.
func (p *publisher) evolve(tx *table.Transaction, tbl *table.Table, s *runner.KeptSnapshot) (cols []column, schema *iceberg.Schema, notes []string, err error) {
	cols = make([]column, len(s.Columns))
	for i, c := range s.Columns {
		cols[i] = columnOf(c)
	}
	schema = tbl.Schema()
	var retyped []string
	for _, c := range cols {
		f, ok := schema.FindFieldByName(c.name)
		if !ok || promotable(f.Type, c.typ) {
			continue
		}
		if c.name == p.j.PartitionBy {
			return nil, nil, nil, fmt.Errorf("snapshot %d of %s: partition column %s changed from %s to %s, which Iceberg schema evolution cannot make: publish it to a new table (a new namespace) or keep the column's type", s.Snapshot, p.j.Name, c.name, f.Type, c.typ)
		}
		retyped = append(retyped, c.name)
		notes = append(notes, fmt.Sprintf("column %s retyped %s -> %s, which Iceberg cannot promote: published as a new column %s (snapshots before %d read the old one)", c.name, f.Type, c.typ, c.name, s.Snapshot))
	}
	// One update (one new schema): a column is dropped and added again
	// under its name in the same change.
	upd := tx.UpdateSchema(true, len(retyped) > 0)
	changed := false
	for _, c := range cols {
		f, ok := schema.FindFieldByName(c.name)
		switch {
		case slices.Contains(retyped, c.name):
			upd.DeleteColumn([]string{c.name})
			upd.AddColumn([]string{c.name}, c.typ, "", false, nil)
			changed = true
		case !ok:
			upd.AddColumn([]string{c.name}, c.typ, "", false, nil)
			changed = true
		case !f.Type.Equals(c.typ):
			upd.UpdateColumn([]string{c.name}, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Valid: true, Val: c.typ}})
			changed = true
		}
	}
	if !changed {
		return cols, schema, notes, nil
	}
	if err := upd.Commit(); err != nil {
		return nil, nil, nil, fmt.Errorf("evolve Iceberg schema of %s for snapshot %d: %w", p.j.Name, s.Snapshot, err)
	}
	schema, err = stagedSchema(tx)
	return cols, schema, notes, err
}

func stagedSchema(tx *table.Transaction) (*iceberg.Schema, error) {
	staged, err := tx.StagedTable()
	if err != nil {
		return nil, err
	}
	return staged.Schema(), nil
}

// stageFiles stages in tx one Iceberg snapshot that removes the data
// files remove and adds add, with summary properties props: an append
// when nothing is removed, and, when nothing changes at all, an empty
// append (a snapshot of no data change that still carries props, so that
// a snapshot changing no row never blocks the ones after it).
func stageFiles(ctx context.Context, tx *table.Transaction, remove, add []string, props iceberg.Properties) error {
	if len(remove) == 0 && len(add) == 0 {
		return tx.AddFiles(ctx, nil, props, false)
	}
	return tx.ReplaceDataFiles(ctx, remove, add, props)
}

// exportSHA is the sha256 and row count of `idem export --snapshot s`
// (CSV), written to a temporary file beside the database (tempDir) and
// removed.
func (p *publisher) exportSHA(ctx context.Context, s int64) (string, int64, error) {
	dir, err := p.db.TempDir()
	if err != nil {
		return "", 0, err
	}
	defer os.RemoveAll(dir)
	res, err := p.db.Export(ctx, runner.ExportOptions{Snapshot: s, Out: filepath.Join(dir, "export.csv"), Format: "csv",
		BeforeRename: func() { p.opts.fault(FaultWhileHashing) }})
	if err != nil {
		return "", 0, fmt.Errorf("export snapshot %d of %s: %w", s, p.j.Name, err)
	}
	return res.SHA256, res.Rows, nil
}
