package source

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
)

// RowsFileColumns is the select list that writes columns cols to an
// upstream's rows file (Upstream.Rows, Parquet): a type Parquet cannot hold
// exactly (HUGEINT, UHUGEINT: DuckDB would write a DOUBLE) goes as its
// text, which the run casts back to Upstream.Columns.
func RowsFileColumns(cols []catalog.TargetColumn) []string {
	list := make([]string, len(cols), len(cols)+1)
	for i, c := range cols {
		list[i] = sqltext.QuoteIdent(c.Name)
		if t := strings.ToUpper(c.Type); t == "HUGEINT" || t == "UHUGEINT" {
			list[i] = "CAST(" + list[i] + " AS VARCHAR) AS " + list[i]
		}
	}
	return list
}

// Upstream is the input of a job that reads other jobs of its database
// ([input] upstream): each upstream's target as committed at the snapshot
// the run pins. Unlike files, what it holds can only be read inside the
// run's transaction, so the run pins it there (Pin) before it decides:
// Resolve has nothing to list, and Pin both reads each upstream's state row
// and makes {{upstream:JOB}} read that job's rows, so that a writer of the
// upstream committing meanwhile cannot tear what the run reads.
type Upstream struct {
	Job *job.Job
	// Recorded, when set, pins the snapshots a snapshot recorded instead of
	// the upstreams' latest, and Rows reads each upstream's rows from the
	// file it was exported to (a rerun: see history.Rerun).
	Recorded []jobkey.UpstreamRef
	Rows     map[string]string // upstream job → Parquet file of its pinned rows
	// Columns, for Rows, are each upstream's columns and types at the
	// pinned snapshot: the file's columns are cast back to them, so the
	// replay reads the types the run read (Parquet has no HUGEINT, say).
	// With Changes, each file holds the upstream's changes (with idem_op)
	// after the snapshot the job's state pinned up to the recorded one.
	Columns map[string][]catalog.TargetColumn

	// Partitions, for an incremental model, makes {{upstream:JOB}} hold
	// only the rows of the partitions that changed (upstream_partitions.go).
	Partitions *Partitions

	// Changes makes {{upstream:JOB}} hold only the rows that changed since
	// the snapshot of JOB in Since (0 or absent: all rows), with a column
	// idem_op: the input of an apply pipeline (upstream_changes.go).
	Changes bool
	Since   map[string]int64
	// External reads the upstreams it names from another idem database
	// attached read-only under the catalog alias given (an environment
	// reads production's committed snapshots of the jobs it did not
	// rebuild): their state row and their target as committed there.
	External map[string]string
	// Realign, for Recorded, names the upstreams the recorded run realigned
	// the job with (rolled back below what it applied; Realigned).
	Realign []string

	// deferred are the relations Pin made views over the committed
	// targets (the job key and the model's columns need no more), which
	// Materialize copies in their canonical order once the run writes.
	deferred []deferredRelation
	ranges   []Range
	columns  map[string][]catalog.TargetColumn
	realign  []string
	notes    []string
}

// Kind is "upstream".
func (u *Upstream) Kind() string { return "upstream" }

// Resolve lists nothing: an upstream has no files to retain, and its
// identity is read inside the transaction (Pin).
func (u *Upstream) Resolve(context.Context) (*Resolved, error) { return &Resolved{}, nil }

// Stage has nothing left to do: Pin made the upstream relations.
// For Changes and a generic pipeline it also makes view input read the
// changed rows (stageChanges).
func (u *Upstream) Stage(ctx context.Context, tx *sql.Tx, _ *Resolved) (*Staged, error) {
	if u.Changes && u.Job.Pipeline.Generic {
		if err := u.stageChanges(ctx, tx); err != nil {
			return nil, err
		}
	}
	if u.Changes {
		return &Staged{}, u.realignKeys(ctx, tx)
	}
	return &Staged{}, nil
}

// Pin reads, inside tx, each upstream's state row and returns the refs of
// the key's input part, by job name; and makes temp table
// idem_upstream_<JOB> hold that job's target's rows. An upstream that has never
// committed is a usage error (exit 2): run it first, or run the project.
func (u *Upstream) Pin(ctx context.Context, tx *sql.Tx) ([]jobkey.UpstreamRef, error) {
	return u.PinStates(ctx, tx, nil)
}

// Local names the upstreams read from the job's own database (not in
// External), in the order Pin pins them.
func (u *Upstream) Local() []string {
	var local []string
	for _, name := range u.Job.SortedUpstream() {
		if _, ok := u.External[name]; !ok {
			local = append(local, name)
		}
	}
	return local
}

// PinStates is Pin with the state rows of the Local upstreams already read
// in tx by the caller (read holds each of them; nil: Pin reads them), so a
// run reads its own state row and its upstreams' in one statement. The
// recorded pins of a rerun read no state row.
func (u *Upstream) PinStates(ctx context.Context, tx *sql.Tx, read map[string]catalog.State) ([]jobkey.UpstreamRef, error) {
	if u.Recorded != nil {
		return u.pinRecorded(ctx, tx)
	}
	u.deferred = nil
	var refs []jobkey.UpstreamRef
	if read == nil {
		var err error
		if read, err = catalog.ReadStates(ctx, tx, u.Local()); err != nil {
			return nil, err
		}
	}
	states := map[string]catalog.State{}
	for _, name := range u.Job.SortedUpstream() {
		if cat, ok := u.External[name]; ok {
			ref, err := u.pinExternal(ctx, tx, cat, name)
			if err != nil {
				return nil, err
			}
			refs = append(refs, ref)
			continue
		}
		st := read[name]
		if !st.Exists || st.Snapshot == 0 || st.Target == "" {
			return nil, &NoUpstreamError{Job: u.Job.Name, Upstream: name, Database: filepath.Base(u.Job.Database)}
		}
		states[name] = st
	}
	if u.Partitions != nil && len(u.Partitions.Columns) > 0 && !u.Changes {
		if err := u.pinPartitions(ctx, tx, states); err != nil { // upstream_partitions.go
			return nil, err
		}
	}
	for _, name := range u.Job.SortedUpstream() {
		st, ok := states[name]
		if !ok {
			continue // read from another database (pinExternal)
		}
		query := "SELECT * FROM main." + sqltext.QuoteIdent(st.Target)
		if u.Partitions != nil && u.Partitions.Restricted {
			query = u.partitionRelation(st.Target)
		}
		if u.Changes {
			if err := u.pinChanges(ctx, tx, name, st.Snapshot); err != nil {
				return nil, err
			}
		} else {
			u.deferred = append(u.deferred, deferredRelation{name: name, query: query})
		}
		refs = append(refs, jobkey.UpstreamRef{Job: name, Snapshot: st.Snapshot, JobKey: st.Key})
	}
	return refs, nil
}

// deferredRelation is an upstream relation Pin left to Views (a view
// over the committed target, made once something reads it) and to
// Materialize (a sorted copy).
type deferredRelation struct {
	name, query string
	made        bool // the view exists in the transaction
}

// Views makes the upstream relations Pin deferred readable, as views over
// the committed targets, once something reads them: the model's DESCRIBE,
// a run that writes, a plan. A run its job key shows skipped never makes
// them (a statement each).
func (u *Upstream) Views(ctx context.Context, tx *sql.Tx) error {
	for i := range u.deferred {
		d := &u.deferred[i]
		if d.made {
			continue
		}
		if err := relation(ctx, tx, d.name, "VIEW", d.query); err != nil {
			return err
		}
		d.made = true
	}
	return nil
}

// Materialize copies the upstream relations Pin left as views over the
// committed targets into TEMP tables in canonical order (ORDER BY ALL), as
// the steps read them: a run that writes calls it once it has decided to;
// a run skipped or already committed never copies a row.
func (u *Upstream) Materialize(ctx context.Context, tx *sql.Tx) error {
	for _, d := range u.deferred {
		if _, err := tx.ExecContext(ctx, "DROP VIEW IF EXISTS "+sqltext.QuoteIdent(seal.UpstreamRelation(d.name))); err != nil {
			return fmt.Errorf("pin upstream %s: %w", d.name, catalog.TrimSQLError(err))
		}
		if err := relation(ctx, tx, d.name, "TABLE", d.query); err != nil {
			return err
		}
	}
	u.deferred = nil
	return nil
}

// pinExternal pins upstream name as committed in the database attached as
// cat: its target there holds exactly the snapshot its state row names.
// Changes of an upstream are read from history, which only the job's own
// database holds for it.
func (u *Upstream) pinExternal(ctx context.Context, tx *sql.Tx, cat, name string) (jobkey.UpstreamRef, error) {
	if u.Changes {
		return jobkey.UpstreamRef{}, fmt.Errorf("job %s applies the changes of upstream %s, which is read from another database (%s): changes are read from the history of the job's own database", u.Job.Name, name, cat)
	}
	st, err := catalog.ReadStateIn(ctx, tx, cat, name)
	if err != nil {
		return jobkey.UpstreamRef{}, err
	}
	if !st.Exists || st.Snapshot == 0 || st.Target == "" {
		return jobkey.UpstreamRef{}, &NoUpstreamError{Job: u.Job.Name, Upstream: name, Database: filepath.Base(u.Job.Database)}
	}
	if err := relation(ctx, tx, name, "TABLE", "SELECT * FROM "+sqltext.QuoteIdent(cat)+".main."+sqltext.QuoteIdent(st.Target)); err != nil {
		return jobkey.UpstreamRef{}, err
	}
	return jobkey.UpstreamRef{Job: name, Snapshot: st.Snapshot, JobKey: st.Key}, nil
}

// pinRecorded pins the recorded refs, reading each upstream's rows from
// its exported file.
func (u *Upstream) pinRecorded(ctx context.Context, tx *sql.Tx) ([]jobkey.UpstreamRef, error) {
	u.realign = slices.Clone(u.Realign)
	for _, ref := range u.Recorded {
		file, ok := u.Rows[ref.Job]
		if !ok {
			return nil, fmt.Errorf("no rows of upstream %s at snapshot %d", ref.Job, ref.Snapshot)
		}
		list := "*"
		if cols := u.Columns[ref.Job]; len(cols) > 0 {
			casts := make([]string, len(cols))
			for i, c := range cols {
				casts[i] = "CAST(" + sqltext.QuoteIdent(c.Name) + " AS " + c.Type + ") AS " + sqltext.QuoteIdent(c.Name)
			}
			list = "* REPLACE (" + strings.Join(casts, ", ") + ")"
		}
		if err := relation(ctx, tx, ref.Job, "TABLE", "SELECT "+list+" FROM read_parquet("+sqltext.SQLString(file)+")"); err != nil {
			return nil, err
		}
		if u.Changes {
			// The file holds the changes after the snapshot the job's
			// state pinned (Since), as the run recorded them.
			u.ranges = append(u.ranges, Range{Job: ref.Job, From: u.Since[ref.Job], To: ref.Snapshot})
			if u.columns == nil {
				u.columns = map[string][]catalog.TargetColumn{}
			}
			u.columns[ref.Job] = u.Columns[ref.Job]
		}
	}
	return u.Recorded, nil
}

// relation creates the temp relation {{upstream:name}} reads. Its rows
// come in one canonical order (ORDER BY ALL), whether it reads the
// upstream's target (a live run) or its history (a rerun): the steps run
// on one thread, so an aggregate that depends on the order rows arrive in
// (a sum of DOUBLE, mode() with a tie, string_agg without ORDER BY) adds
// them in the same order in both. It is a table in both, never a view: the
// planner plans a query over a view and over a table differently (a
// self-join or a UNION of the upstream feeds rows in another order), so
// the same kind of relation gives the same plan.
func relation(ctx context.Context, tx *sql.Tx, name, kind, query string) error {
	order := " ORDER BY ALL"
	if kind == "VIEW" {
		order = "" // no rows are read through it: the job key and DESCRIBE
	}
	q := "CREATE OR REPLACE TEMP " + kind + " " + sqltext.QuoteIdent(seal.UpstreamRelation(name)) + " AS SELECT * FROM (" + query + ")" + order
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("pin upstream %s: %w", name, catalog.TrimSQLError(err))
	}
	return nil
}

// A Pinner is an input the run pins inside its transaction before it
// decides (Upstream).
type Pinner interface {
	Pin(ctx context.Context, tx *sql.Tx) ([]jobkey.UpstreamRef, error)
	// Views makes what Pin pinned readable, before anything reads it.
	Views(ctx context.Context, tx *sql.Tx) error
	// Materialize makes the pinned rows what the steps read, once the run
	// has decided to write.
	Materialize(ctx context.Context, tx *sql.Tx) error
}

// NoUpstreamError is a run of a job whose upstream has never committed in
// its database: a usage error (exit 2). A plan of a project reports the job
// as loading once the upstream has.
type NoUpstreamError struct{ Job, Upstream, Database string }

func (e *NoUpstreamError) Error() string {
	return fmt.Sprintf("job %s reads upstream %s, which has no committed snapshot in %s: run %s first (idem run on the project folder runs upstreams first)",
		e.Job, e.Upstream, e.Database, e.Upstream)
}

func (e *NoUpstreamError) Unwrap() error { return report.ErrUsage }
