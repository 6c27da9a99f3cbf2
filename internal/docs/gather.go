package docs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/project"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// Site is what the page shows: the project's jobs in run order, each with
// what its database holds.
type Site struct {
	// Title is the project folder's name.
	Title string
	Jobs  []*Job
}

// Job is one job of the project as the page shows it.
type Job struct {
	// ID is the job's anchor in the page: job-NAME, or job-NAME-I (I its
	// place in run order) when two databases of the project hold a job of
	// that name.
	ID       string
	Name     string
	File     string // the job file, relative to the project folder
	Database string // relative to the project folder when inside it
	Table    string
	Pipeline string
	Mode     string
	Model    bool
	// Transform and schema versions; Schema is 0 for a model, Transform 0
	// for a model written as one file, whose version is its text's sha256.
	// Version says them in words.
	Transform, Schema int
	Version           string
	// Description is the job's text for people and DescriptionFrom where it
	// was read: the job file's description key, its leading # comment, or
	// its model's leading -- comment.
	Description, DescriptionFrom string
	Key                          []string
	PartitionBy                  string
	// Upstream are the jobs this one reads, by name, in the job file's
	// order; those of the project carry their ID.
	Upstream []Ref
	// Downstream are the project's jobs that read this one.
	Downstream []Ref
	// InputColumns are the columns the pipeline (or the job) declares for
	// its input; none for a model.
	InputColumns []Column
	// Steps are the transform version's SQL files; ModelFile and ModelSQL a
	// model's SELECT.
	Steps               []string
	ModelFile, ModelSQL string
	Audits              []Audit

	// NotRun says why the database holds nothing of the job ("" once it
	// has a run).
	NotRun string
	// Status is not_run, ok, warn (the last commit noted a warn audit's
	// violations) or failed (the last run failed or was refused).
	Status string
	// Snapshot is the latest committed snapshot; Columns the target's
	// columns as that snapshot recorded them.
	Snapshot  int64
	Columns   []Column
	ColumnsAt int64
	// Snapshots are the newest snapshots, newest first, of SnapshotsTotal.
	Snapshots      []Snapshot
	SnapshotsTotal int
	// Runs are the newest runs of the run log, newest first, of RunsTotal.
	Runs      []Run
	RunsTotal int
	// LastFailure is the newest failed or refused run, nil when none.
	LastFailure *Run

	// columnDocs are the columns' descriptions by name (columns.go).
	columnDocs map[string]string
}

// Column is a column of a job's input or target; Key marks the job's key
// columns; Description is what the job file's [columns] (or a model's
// comment) says of it.
type Column struct {
	Name, Type  string
	Key         bool
	Description string
}

// Ref names another job; ID is "" for an upstream outside the project.
type Ref struct {
	Name, ID string
}

// Audit is one [[audit]] of a job and its last result.
type Audit struct {
	Name, Kind, Severity string
	// Check says what the audit checks, in words and the job file's terms.
	Check string
	// Result is the last result in words; ResultClass is none, passed,
	// warn or failed.
	Result, ResultClass string
}

// Snapshot is one committed snapshot of a job.
type Snapshot struct {
	Snapshot, Parent int64
	Kind, BatchID    string
	// Rows is the target's row count at the snapshot, "" when not
	// recorded.
	Rows string
	// Hashes are the release packet's entries: the whole target, or each
	// partition the run touched, with its rows and sha256. Empty for a
	// snapshot without a packet (a rollback, an erasure).
	Hashes []Hash
}

// Hash is one release-packet entry of a snapshot.
type Hash struct {
	Part   string // "whole target" or "COLUMN = VALUE"
	Rows   string
	SHA256 string
	// Note stands for a sha256 the page does not compute (SHA256 empty).
	Note string
}

// Run is one row of the run log.
type Run struct {
	Time, BatchID, Decision, Changed, RowsIn, Outcomes, Message string
	Snapshot                                                    int64
}

// Options are how Gather reads the databases.
type Options struct {
	// Wait is how long to wait for a writer to release a database (0:
	// fail at once, exit 4).
	Wait time.Duration
	// Runs and Snapshots bound how many of each the page lists per job
	// (default 10 and 20).
	Runs, Snapshots int
	// HashRows bounds the rows of a snapshot whose pending whole-target
	// sha256 the page computes (default 1,000,000): a job without
	// partition_by commits its packet's counts and leaves the sha256 to be
	// computed when asked, which costs about one export of the snapshot.
	// Past the bound the page names the command that prints it.
	HashRows int64
}

// Statuses of a job on the page.
const (
	StatusNotRun = "not_run"
	StatusOK     = "ok"
	StatusWarn   = "warn"
	StatusFailed = "failed"
)

// Gather reads the jobs of p, whose job files are in folder dir, and what
// their databases hold. Each database is opened read-only, once; a
// database that does not exist yet leaves its jobs "not run yet". A
// database held by a writer is a *run.LockedError (exit 4) after
// opts.Wait.
func Gather(ctx context.Context, p *project.Project, dir string, opts Options) (*Site, error) {
	if opts.Runs <= 0 {
		opts.Runs = 10
	}
	if opts.HashRows <= 0 {
		opts.HashRows = 1_000_000
	}
	if opts.Snapshots <= 0 {
		opts.Snapshots = 20
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	site := &Site{Title: filepath.Base(abs)}
	ids := jobIDs(p.Jobs)
	byJob := map[*job.Job]*Job{}
	for _, j := range p.Jobs {
		d, err := describe(j, abs)
		if err != nil {
			return nil, err
		}
		d.ID = ids[j]
		byJob[j] = d
		site.Jobs = append(site.Jobs, d)
	}
	for _, j := range p.Jobs {
		in := map[string]string{}
		for _, u := range p.Upstream(j) {
			in[u.Name] = ids[u]
			byJob[u].Downstream = append(byJob[u].Downstream, Ref{Name: j.Name, ID: ids[j]})
		}
		for _, name := range j.Input.Upstream {
			byJob[j].Upstream = append(byJob[j].Upstream, Ref{Name: name, ID: in[name]})
		}
	}
	for _, group := range p.Groups() {
		if err := readDatabase(ctx, group, byJob, abs, opts); err != nil {
			return nil, err
		}
	}
	return site, nil
}

// jobIDs gives each job its anchor: job-NAME, unless another database of
// the project has a job of that name.
func jobIDs(jobs []*job.Job) map[*job.Job]string {
	count := map[string]int{}
	for _, j := range jobs {
		count[j.Name]++
	}
	ids := map[*job.Job]string{}
	for i, j := range jobs {
		ids[j] = "job-" + j.Name
		if count[j.Name] > 1 {
			ids[j] += "-" + strconv.Itoa(i+1)
		}
	}
	return ids
}

// describe is what the job file says of j.
func describe(j *job.Job, dir string) (*Job, error) {
	d := &Job{
		Name: j.Name, File: rel(dir, j.File), Database: rel(dir, j.Database), Table: j.Table,
		Pipeline: j.Pipeline.Name, Mode: j.Pipeline.Mode, Model: j.Pipeline.Model,
		Transform: j.TransformVersion, Schema: j.SchemaVersion, Version: report.VersionText(j.TransformVersion, j.SchemaVersion, j.TransformPart().SHA256, j.IsModel()),
		Key: j.Pipeline.Key, PartitionBy: j.PartitionBy,
		Status: StatusNotRun, NotRun: "not run yet",
	}
	if d.Model {
		d.Schema = 0
		d.ModelFile, d.ModelSQL = rel(dir, j.ModelFile), j.ModelSQL
	} else {
		for _, c := range j.Pipeline.Columns {
			d.InputColumns = append(d.InputColumns, Column{Name: c.Name, Type: c.Type, Key: slices.Contains(d.Key, c.Name)})
		}
		for _, s := range j.Steps {
			d.Steps = append(d.Steps, s.Name)
		}
	}
	text, err := jobfs.ReadJobFile(j.File)
	if err != nil {
		return nil, err
	}
	d.columnDocs, err = job.ColumnDocs(j.File, text)
	if err != nil {
		return nil, err
	}
	if d.Model {
		for name, s := range modelColumnDocs(j.ModelSQL) {
			if _, ok := d.columnDocs[name]; !ok {
				if d.columnDocs == nil {
					d.columnDocs = map[string]string{}
				}
				d.columnDocs[name] = s
			}
		}
	}
	for i, c := range d.InputColumns {
		d.InputColumns[i].Description = d.columnDocs[c.Name]
	}
	switch {
	case strings.TrimSpace(j.Description) != "":
		d.Description, d.DescriptionFrom = strings.TrimSpace(j.Description), "description"
	case leadingComment(string(text), "#") != "":
		d.Description, d.DescriptionFrom = leadingComment(string(text), "#"), "job file comment"
	case d.Model && leadingComment(j.ModelSQL, "--") != "":
		d.Description, d.DescriptionFrom = leadingComment(j.ModelSQL, "--"), "model comment"
	}
	for _, a := range j.Audits {
		d.Audits = append(d.Audits, Audit{Name: a.Name, Kind: a.Kind, Severity: a.Severity, Check: auditCheck(a),
			Result: "not run yet", ResultClass: "none"})
	}
	return d, nil
}

// rel is path relative to dir, with forward slashes (../data/x.duckdb for
// a database beside the project), so that the page does not depend on
// where the project lies.
func rel(dir, path string) string {
	if path == "" {
		return ""
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	r, err := filepath.Rel(dir, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}
	return filepath.ToSlash(r)
}

// leadingComment is the block of comment lines (starting with prefix) at
// the top of text, blank lines before it skipped, each line without its
// prefix and one space after it.
func leadingComment(text, prefix string) string {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		t := strings.TrimSpace(l)
		if t == "" && len(lines) == 0 {
			continue
		}
		if !strings.HasPrefix(t, prefix) {
			break
		}
		t = strings.TrimPrefix(t, prefix)
		lines = append(lines, strings.TrimRight(strings.TrimPrefix(t, " "), " \t"))
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

// auditCheck says what audit a checks.
func auditCheck(a job.Audit) string {
	switch a.Kind {
	case job.AuditUnique:
		return "one row per " + strings.Join(a.Columns, ", ")
	case job.AuditNotNull:
		return strings.Join(a.Columns, ", ") + " never NULL"
	case job.AuditAcceptedValues:
		return a.Column + " in (" + strings.Join(a.Values, ", ") + ")"
	case job.AuditRowCount:
		var parts []string
		if a.Min != nil {
			parts = append(parts, "at least "+rowsText(*a.Min))
		}
		if a.Max != nil {
			parts = append(parts, "at most "+rowsText(*a.Max))
		}
		if a.MaxChangePct != nil {
			parts = append(parts, fmt.Sprintf("rows change at most %g%% from the previous snapshot", *a.MaxChangePct))
		}
		return strings.Join(parts, ", ")
	case job.AuditRelationships:
		return "every " + a.Column + " is in " + a.To
	case job.AuditSQL:
		return strings.TrimSpace(a.SQL)
	}
	return a.Kind
}

// rowsText is "1 row" or "N rows".
func rowsText(n int64) string {
	if n == 1 {
		return "1 row"
	}
	return report.Thousands(n) + " rows"
}

// readDatabase reads what the database of group (jobs of one database
// file) holds of each of them, read-only.
func readDatabase(ctx context.Context, group []*job.Job, byJob map[*job.Job]*Job, dir string, opts Options) error {
	path := group[0].Database
	if path == "" {
		for _, j := range group {
			byJob[j].NotRun = "not run yet: the job file names no database (run takes --db; docs reads the job file's)"
		}
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		for _, j := range group {
			byJob[j].NotRun = "not run yet: database " + rel(dir, path) + " does not exist"
		}
		return nil
	}
	db, err := run.Open(ctx, path, run.OpenOptions{ReadOnly: true, Wait: opts.Wait, DuckDB: group[0].DuckDB})
	if err != nil {
		return err
	}
	defer db.Close()
	for _, j := range group {
		if err := readJob(ctx, db, j, byJob[j], opts); err != nil {
			return err
		}
	}
	return nil
}

// readJob fills d with j's state, run log and snapshots.
func readJob(ctx context.Context, db *run.DB, j *job.Job, d *Job, opts Options) error {
	q := db.SQL()
	st, err := catalog.ReadState(ctx, q, j.Name)
	if err != nil {
		return err
	}
	entries, err := history.Log(ctx, db, j.Name)
	if err != nil {
		return err
	}
	if !st.Exists && len(entries) == 0 {
		return nil
	}
	d.NotRun, d.Status, d.Snapshot = "", StatusOK, st.Snapshot
	d.RunsTotal = len(entries)
	for i, e := range entries {
		r := logRun(e)
		if i < opts.Runs {
			d.Runs = append(d.Runs, r)
		}
		if d.LastFailure == nil && (e.Decision == report.DecisionFailed || e.Decision == report.DecisionRefused) {
			d.LastFailure = &r
		}
	}
	if len(entries) > 0 && (entries[0].Decision == report.DecisionFailed || entries[0].Decision == report.DecisionRefused) {
		d.Status = StatusFailed
	}
	auditResults(d, entries)
	if d.Status == StatusOK {
		for _, a := range d.Audits {
			if a.ResultClass == "warn" {
				d.Status = StatusWarn
			}
		}
	}
	if st.Snapshot == 0 {
		return nil
	}
	snaps, err := catalog.ReadSnapshots(ctx, q, j.Name, st.Snapshot)
	if err != nil {
		return err
	}
	d.SnapshotsTotal = len(snaps)
	for _, s := range slices.Backward(snaps) {
		if d.Columns == nil && len(s.Columns) > 0 {
			for _, c := range s.Columns {
				d.Columns = append(d.Columns, Column{Name: c.Name, Type: c.Type, Key: slices.Contains(d.Key, c.Name), Description: d.columnDocs[c.Name]})
			}
			d.ColumnsAt = s.Snapshot
		}
		if len(d.Snapshots) >= opts.Snapshots {
			if d.Columns != nil {
				break
			}
			continue
		}
		snap, err := readSnapshot(ctx, db, j, s, opts.HashRows)
		if err != nil {
			return err
		}
		d.Snapshots = append(d.Snapshots, snap)
	}
	return nil
}

// readSnapshot is one snapshot row with its row count and, from its
// release packet, its sha256s (a whole target's computed from its rows
// when its run left it pending and it holds at most hashRows rows).
func readSnapshot(ctx context.Context, db *run.DB, j *job.Job, s *catalog.SnapshotRow, hashRows int64) (Snapshot, error) {
	name := j.Name
	out := Snapshot{Snapshot: s.Snapshot, Parent: s.Parent, Kind: s.Kind, BatchID: s.BatchID}
	c, err := catalog.ReadSnapshotCounts(ctx, db.SQL(), name, s.Snapshot)
	if err != nil {
		return out, err
	}
	if c.RowsOut.Valid {
		out.Rows = report.Thousands(c.RowsOut.Int64)
	}
	p, err := catalog.ReadPacket(ctx, db.SQL(), name, s.Snapshot)
	if errors.Is(err, catalog.ErrNoPacket) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	if computeHashes(p, hashRows) {
		if p, err = inspect.Packet(ctx, db, j, s.Snapshot, report.Progress{}); err != nil {
			return out, err
		}
	}
	for _, e := range p.Entries {
		part := "whole target"
		if e.Partition != nil {
			part = p.PartitionBy + " = " + *e.Partition
		}
		h := Hash{Part: part, Rows: report.Thousands(e.Rows), SHA256: e.SHA256}
		if e.Pending() {
			h.Note = fmt.Sprintf("not computed here (over %s rows): idem show %s --snapshot %d", report.Thousands(hashRows), name, s.Snapshot)
		}
		out.Hashes = append(out.Hashes, h)
	}
	return out, nil
}

// computeHashes says whether the page computes the pending sha256s of
// packet p: it has some, over at most hashRows rows in all.
func computeHashes(p *catalog.Packet, hashRows int64) bool {
	var pending int64
	for i := range p.Entries {
		if p.Entries[i].Pending() {
			pending += p.Entries[i].Rows
		}
	}
	return pending > 0 && pending <= hashRows
}

// logRun is a run log entry in the page's words.
func logRun(e catalog.LogEntry) Run {
	r := Run{Time: e.Time.UTC().Format("2006-01-02 15:04:05"), Decision: e.Decision, Snapshot: e.Snapshot, RowsIn: "-"}
	if e.BatchID != nil {
		r.BatchID = *e.BatchID
	}
	if e.RowsIn != nil {
		r.RowsIn = report.Thousands(*e.RowsIn)
	}
	changed := slices.Clone(e.Changed)
	if e.FirstLoad {
		changed = append(changed, "first_load")
	}
	r.Changed = strings.Join(changed, ", ")
	var oc []string
	for _, k := range slices.Sorted(maps.Keys(e.Outcomes)) {
		oc = append(oc, fmt.Sprintf("%s %s", k, report.Thousands(e.Outcomes[k])))
	}
	r.Outcomes = strings.Join(oc, ", ")
	if e.Message != nil {
		r.Message = *e.Message
	}
	return r
}

// auditResults sets each audit's last result from the run log, newest
// first: a failed or refused run whose message names the audit failed it
// (an error audit's violations, or the audit's own error); a committing
// run noted a warn audit's violations in its message, and one that did
// not name the audit found none. Skipped and already-committed runs ran no
// audit; other failures may have stopped before the audits.
func auditResults(d *Job, entries []catalog.LogEntry) {
	for i := range d.Audits {
		a := &d.Audits[i]
		mark := "audit " + a.Name + " ("
		for _, e := range entries {
			msg := ""
			if e.Message != nil {
				msg = *e.Message
			}
			failed := e.Decision == report.DecisionFailed || e.Decision == report.DecisionRefused
			committed := e.Decision == report.DecisionLoaded || e.Decision == report.DecisionApplied
			if failed && strings.Contains(msg, mark) {
				a.Result, a.ResultClass = fmt.Sprintf("failed the run of %s UTC: %s", e.Time.UTC().Format("2006-01-02 15:04:05"), msg), "failed"
				break
			}
			if committed {
				if note, ok := auditNote(msg, mark); ok {
					a.Result, a.ResultClass = fmt.Sprintf("snapshot %d: %s", e.Snapshot, note), "warn"
				} else {
					a.Result, a.ResultClass = fmt.Sprintf("snapshot %d: no violation noted", e.Snapshot), "passed"
				}
				break
			}
		}
	}
}

// auditNote finds the part of a run's note about the audit that mark
// ("audit NAME (") names: "audit NAME (KIND, warn) found N violation(s)".
func auditNote(msg, mark string) (string, bool) {
	for _, part := range strings.Split(msg, "; ") {
		if strings.HasPrefix(part, mark) {
			return part, true
		}
	}
	return "", false
}
