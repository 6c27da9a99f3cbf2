package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/dbfile"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
)

// ChainEraseResult reports an erasure through the chain of jobs: the
// erasure in each job that held the subject, and the models recomputed
// without it.
type ChainEraseResult struct {
	// Erased are the jobs the subject was removed from by its columns, in
	// run order (the jobs named first, then the jobs that read them).
	Erased []*EraseResult `json:"erased"`
	// Recomputed are the models rebuilt from their upstreams' rows without
	// the subject, for every kept snapshot.
	Recomputed []*RecomputeResult `json:"recomputed"`
	// Untouched are the jobs that read an erased job and held none of the
	// subject's rows.
	Untouched []string `json:"untouched"`
	// NotHeld are the jobs named (a project's that declare [privacy]
	// subject, EraseOptions.AnyRoot) that held none of the subject and had
	// never been erased of it: nothing was erased there.
	NotHeld []string `json:"not_held"`
	// DryRun says nothing was committed: the lists say what would be.
	DryRun bool `json:"dry_run"`
	// Replica reports the read replica published after the erasure.
	Replica *run.ReplicaInfo `json:"replica,omitempty"`
	// Compact reports the compaction after it (CompactAfterErasure).
	Compact *dbfile.CompactResult `json:"compact,omitempty"`
}

// RecomputeResult is one model rebuilt by an erasure: its new snapshot and,
// for each kept snapshot, the rows it held before and holds now.
type RecomputeResult struct {
	Job       string              `json:"job"`
	Snapshot  int64               `json:"snapshot"`
	Parent    int64               `json:"parent"`
	Snapshots []RecomputeSnapshot `json:"snapshots"`
	// Packets are the snapshots whose release packet was rewritten (the
	// sha256 it replaced is kept in it; idem show).
	Packets []int64 `json:"packets_rewritten,omitempty"`
}

// RecomputeSnapshot is one kept snapshot of a recomputed model.
type RecomputeSnapshot struct {
	Snapshot   int64 `json:"snapshot"`
	RowsBefore int64 `json:"rows_before"`
	RowsAfter  int64 `json:"rows_after"`
	// differs says its rows changed, in count or in values.
	differs bool
}

// changed is the set of kept snapshots whose rows the recompute changed.
func (r *RecomputeResult) changed() map[int64]bool {
	out := map[int64]bool{}
	for _, s := range r.Snapshots {
		if s.differs {
			out[s.Snapshot] = true
		}
	}
	return out
}

// EraseChain erases opts' key or subject from roots and from every job
// that reads one of them, transitively, in ONE transaction: a job that
// keeps the upstream's rows (an apply job fed by upstream changes, say)
// loses the rows in which the erased job's matched columns it shares by
// name, or (--subject only) its [privacy] subject columns, hold the erased
// values; a model (pipeline select), a root too, is recomputed, for every
// kept snapshot, from its upstreams' rows without the subject, and a root
// model that still holds it is refused (exit 2: an upstream holds it).
// With opts.AnyRoot a root that never held the subject is reported
// (NotHeld), and it is an error only when no root holds it. beside are the job files that may
// read the roots (the project's); a job of the database that read an
// erased job and is not among them is refused (exit 2) before anything is
// written, since its copy would outlive the erasure. Each job changed gets
// a new snapshot; file work (replaced inputs, checkpoints) follows the
// COMMIT as for one job.
func EraseChain(ctx context.Context, d *run.DB, roots, beside []*job.Job, opts EraseOptions) (*ChainEraseResult, error) {
	matches := map[*job.Job]*eraseMatch{}
	for _, r := range roots {
		m, err := eraseMatchOf(r, opts)
		if err != nil {
			return nil, err
		}
		matches[r] = m
	}
	if d.ReadOnly() {
		return nil, errors.New("database opened read-only")
	}
	if err := RefuseUnpublished(roots, beside, opts); err != nil {
		return nil, err
	}
	if !opts.DryRun {
		if err := removePublishTemps(d); err != nil {
			return nil, err
		}
	}
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer func() { _ = tx.Rollback() }() // first: an open transaction holds conn, whose Close would wait for it (a panic)
	res, stale, err := eraseChainTx(ctx, d, tx, roots, beside, matches, opts)
	end := erasureEnd{stale: stale}
	if err == nil {
		res.DryRun = opts.DryRun
		end.commit, end.jobs = res.changes() > 0 && !opts.DryRun, res.jobNames()
	}
	replica, err := end.finish(ctx, d, conn, tx, err, opts.Fault)
	if err != nil {
		return nil, err
	}
	res.Replica = replica
	return res, nil
}

// Root is the erasure of the one job named, with the jobs that read it
// (Downstream) and the models recomputed: the JSON of idem erase JOB.
func (r *ChainEraseResult) Root() *EraseResult {
	root := *r.Erased[0]
	root.Downstream = r.Erased[1:]
	root.Recomputed = r.Recomputed
	root.Untouched = r.Untouched
	root.DryRun = r.DryRun
	root.Replica = r.Replica
	root.Compact = r.Compact
	return &root
}

// changes counts the jobs the erasure changes.
func (r *ChainEraseResult) changes() int {
	n := len(r.Recomputed)
	for _, e := range r.Erased {
		if !e.AlreadyErased {
			n++
		}
	}
	return n
}

func (r *ChainEraseResult) jobNames() []string {
	var out []string
	for _, e := range r.Erased {
		if !e.AlreadyErased {
			out = append(out, e.Job)
		}
	}
	for _, m := range r.Recomputed {
		out = append(out, m.Job)
	}
	return out
}

// eraseChainTx is EraseChain's work inside tx; it returns the files to
// delete after the commit.
func eraseChainTx(ctx context.Context, d *run.DB, tx *sql.Tx, roots, beside []*job.Job, matches map[*job.Job]*eraseMatch, opts EraseOptions) (*ChainEraseResult, []string, error) {
	order, err := chainOrder(ctx, tx, roots, beside)
	if err != nil {
		return nil, nil, err
	}
	readers, err := readersByUpstream(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	res := &ChainEraseResult{Erased: []*EraseResult{}, Recomputed: []*RecomputeResult{}, Untouched: []string{}, NotHeld: []string{}}
	// changed are the jobs this erasure changed (or that were erased of it
	// before): a job none of whose upstreams is among them holds nothing
	// of it that the chain would reach.
	changed := map[string]bool{}
	var stale []string
	// values are the values erased, by column, over every job so far: a
	// reader keeps the upstream's columns under their names.
	values := map[string][]string{}
	// tuple is the composite key erased (idem erase --key COL=V ...): a
	// reader loses the rows in which all of its columns hold its values.
	var tuple map[string][]string
	isRoot := map[*job.Job]bool{}
	for _, r := range roots {
		isRoot[r] = true
	}
	for _, j := range order {
		if !isRoot[j] && !readsChanged(j, readers, changed) {
			res.Untouched = append(res.Untouched, j.Name)
			continue
		}
		if j.IsModel() {
			// A model's rows are a function of its upstreams' alone, named
			// or not: it is recomputed from them, never erased from in place
			// (an aggregate would keep the subject's part). Over upstreams
			// this erasure left as they were it would not change.
			var r *RecomputeResult
			if readsChanged(j, readers, changed) {
				if r, err = recomputeModel(ctx, d, tx, j, opts.Fault); err != nil {
					return nil, nil, err
				}
			}
			if isRoot[j] {
				held, err := modelStillHolds(ctx, tx, j, matches[j])
				if err != nil {
					return nil, nil, err
				}
				if held {
					return nil, nil, modelHoldsError(j, matches[j])
				}
				if r == nil {
					if opts.AnyRoot {
						res.NotHeld = append(res.NotHeld, j.Name)
						continue
					}
					return nil, nil, notHeldError(j, matches[j])
				}
				if !matches[j].all {
					addValues(values, matches[j].values)
				}
			}
			if r == nil {
				res.Untouched = append(res.Untouched, j.Name)
				continue
			}
			if r.Packets, err = refreshPackets(ctx, d, tx, j, r.Snapshot, r.changed()); err != nil {
				return nil, nil, err
			}
			res.Recomputed = append(res.Recomputed, r)
			changed[j.Name] = true
			continue
		}
		if isRoot[j] {
			m := matches[j]
			r, s, err := eraseTx(ctx, d, tx, j, m, opts)
			var nh *NotHeldError
			if opts.AnyRoot && errors.As(err, &nh) {
				res.NotHeld = append(res.NotHeld, j.Name)
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			changed[j.Name] = true
			// A job erased before still has its readers looked at: they may
			// have been left holding copies (by an idem that did not follow
			// the chain).
			if !r.AlreadyErased {
				if r.Packets, err = refreshPackets(ctx, d, tx, j, r.Snapshot, nil); err != nil {
					return nil, nil, err
				}
			}
			res.Erased = append(res.Erased, r)
			stale = append(stale, s...)
			if m.all {
				tuple = m.values
			} else {
				addValues(values, m.values)
			}
			continue
		}
		m, err := readerMatch(ctx, tx, j, opts, values, tuple)
		if err != nil {
			return nil, nil, err
		}
		r, s, err := eraseTx(ctx, d, tx, j, m, EraseOptions{Fault: opts.Fault, Replay: true, cascade: true})
		if err != nil {
			return nil, nil, err
		}
		if r == nil {
			res.Untouched = append(res.Untouched, j.Name)
			continue
		}
		if r.Packets, err = refreshPackets(ctx, d, tx, j, r.Snapshot, nil); err != nil {
			return nil, nil, err
		}
		res.Erased = append(res.Erased, r)
		stale = append(stale, s...)
		addValues(values, m.values)
		changed[j.Name] = true
	}
	if opts.AnyRoot && len(res.Erased) == 0 && len(res.Recomputed) == 0 {
		return nil, nil, fmt.Errorf("erase %s: no job that declares it holds it (looked in %s); nothing committed", describeMatch(opts), strings.Join(res.NotHeld, ", "))
	}
	return res, stale, nil
}

// readsChanged says whether job j reads (by its job file or, as the
// database recorded, by an earlier run) a job of changed.
func readsChanged(j *job.Job, readers map[string][]string, changed map[string]bool) bool {
	for _, u := range j.Input.Upstream {
		if changed[u] {
			return true
		}
	}
	for u := range changed {
		if slices.Contains(readers[u], j.Name) {
			return true
		}
	}
	return false
}

// NotHeldError is the error of an erasure of a key or subject that a job
// holds in no row, snapshot or retained input and was never erased of:
// nothing is committed.
type NotHeldError struct {
	Job     string
	Subject []string // nil: an erasure by key
	Value   string
}

func (e *NotHeldError) Error() string {
	if e.Subject != nil {
		return fmt.Sprintf("erase subject %s from job %s: no row, snapshot or retained input holds it in %s; nothing committed", e.Value, e.Job, strings.Join(e.Subject, ", "))
	}
	return fmt.Sprintf("erase %s from job %s: the key is in no row, snapshot or retained input; nothing committed", e.Value, e.Job)
}

func notHeldError(j *job.Job, m *eraseMatch) error {
	return &NotHeldError{Job: j.Name, Subject: m.subject, Value: m.value}
}

// describeMatch names what opts erase, for messages.
func describeMatch(opts EraseOptions) string {
	if opts.Subject != "" {
		return "subject " + opts.Subject
	}
	return "key " + opts.Key
}

// modelStillHolds says whether model j, recomputed from its upstreams,
// still holds m in its rows (current or of any kept snapshot).
func modelStillHolds(ctx context.Context, tx *sql.Tx, j *job.Job, m *eraseMatch) (bool, error) {
	places, err := jobPlaces(ctx, tx, j, "")
	if err != nil {
		return false, err
	}
	for _, p := range places[:min(2, len(places))] { // the target and its history
		where := m.where(p.cols)
		if where == "" {
			continue
		}
		var n int64
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+p.name+" WHERE "+where).Scan(&n); err != nil {
			return false, fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
		}
		if n > 0 {
			return true, nil
		}
	}
	return false, nil
}

// modelHoldsError is the refusal of an erasure from model j whose rows,
// recomputed from its upstreams, still hold m: the subject is in an
// upstream's rows.
func modelHoldsError(j *job.Job, m *eraseMatch) error {
	what := "key " + m.value
	if m.subject != nil {
		what = fmt.Sprintf("subject %s (in %s)", m.value, strings.Join(m.subject, ", "))
	}
	return report.Usage("erase: model %s is computed from its upstreams (%s), and recomputed without what this erasure removed it still holds %s: the upstreams hold it. Erase it there: declare [privacy] subject in the upstream that holds it and erase the project folder (idem erase PROJECT_DIR --subject VALUE); nothing committed",
		j.Name, strings.Join(j.Input.Upstream, ", "), what)
}

func addValues(into, from map[string][]string) {
	for c, vs := range from {
		for _, v := range vs {
			if !slices.Contains(into[c], v) {
				into[c] = append(into[c], v)
			}
		}
	}
}

// readerMatch is what an erasure removes from j, a job that keeps rows of
// an erased upstream: the values erased upstream in the columns it shares
// with them by name and, for an erasure by subject only, the subject in
// its own [privacy] subject columns (a key is the erased job's own: the
// same value in another job's subject columns names someone else). A
// reader with none of those columns is refused: its copy of the rows could
// not be found.
//
// The erasure of a composite key (tuple) reaches a reader that has every
// column of the key, by all of them at once.
func readerMatch(ctx context.Context, tx *sql.Tx, j *job.Job, opts EraseOptions, values, tuple map[string][]string) (*eraseMatch, error) {
	cols, err := columnsOf(ctx, tx, sqltext.QuoteIdent(j.Table))
	if err != nil {
		return nil, err
	}
	if tuple != nil {
		keys := slices.Sorted(maps.Keys(tuple))
		for _, c := range keys {
			if !cols[c] {
				return nil, report.Usage("erase: job %s reads an erased job and keeps its rows in %s, but lacks column %s of the composite key (%s) erased: its copy of the key could not be found",
					j.Name, j.Table, c, strings.Join(keys, ", "))
			}
		}
		return &eraseMatch{value: opts.Key, subject: keys, keyCol: oneKeyColumn(j), values: tuple, all: true}, nil
	}
	value := opts.Subject
	if value == "" {
		value = opts.Key
	}
	m := &eraseMatch{value: value, values: map[string][]string{}, keyCol: oneKeyColumn(j)}
	if opts.Subject != "" {
		// Only a subject crosses jobs: a key's value is the erased job's
		// own, and in another job's subject columns it names someone else.
		for _, c := range j.Privacy.Subject {
			m.values[c] = []string{value}
			m.subject = append(m.subject, c)
		}
	}
	for c, vs := range values {
		if cols[c] {
			addValues(m.values, map[string][]string{c: vs})
			if !slices.Contains(m.subject, c) {
				m.subject = append(m.subject, c)
			}
		}
	}
	if len(m.values) == 0 && opts.Subject == "" {
		return nil, report.Usage("erase: job %s reads an erased job and keeps its rows in %s, but has none of the columns %s the erased key's rows are found by (a key is never looked for in another job's [privacy] subject columns): its copy of them could not be found. Erase by --subject, or give %s those columns",
			j.Name, j.Table, strings.Join(slices.Sorted(maps.Keys(values)), ", "), j.Name)
	}
	if len(m.values) == 0 {
		return nil, report.Usage("erase: job %s reads an erased job and keeps its rows in %s, but has none of the columns %s and declares no [privacy] subject: its copy of the subject could not be found. Declare [privacy] subject in %s",
			j.Name, j.Table, strings.Join(slices.Sorted(maps.Keys(values)), ", "), j.File)
	}
	slices.Sort(m.subject)
	return m, nil
}

// chainOrder is roots and every job that reads one of them, transitively,
// in run order. A reader is found by name among beside (same database);
// one the database says has read an erased job and that beside lacks is a
// usage error (exit 2).
func chainOrder(ctx context.Context, tx *sql.Tx, roots, beside []*job.Job) ([]*job.Job, error) {
	readers, err := readersByUpstream(ctx, tx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*job.Job{}
	for _, j := range beside {
		if j.Database == roots[0].Database {
			byName[j.Name] = j
		}
	}
	in := map[string]*job.Job{}
	var all []*job.Job
	add := func(j *job.Job) {
		if in[j.Name] == nil {
			in[j.Name] = j
			all = append(all, j)
		}
	}
	for _, r := range roots {
		add(r)
		byName[r.Name] = r
	}
	for i := 0; i < len(all); i++ {
		up := all[i]
		names := slices.Clone(readers[up.Name])
		for _, j := range beside {
			if j.Database == up.Database && slices.Contains(j.Input.Upstream, up.Name) && !slices.Contains(names, j.Name) {
				names = append(names, j.Name)
			}
		}
		slices.Sort(names)
		for _, n := range names {
			j, ok := byName[n]
			if !ok {
				return nil, report.Usage("erase: job %s of this database has read %s, but no job file for it was given (looked beside %s): its copy of the subject would outlive the erasure. Give the project folder, or the job files of every job that reads %s",
					n, up.Name, up.File, up.Name)
			}
			add(j)
		}
	}
	return runOrder(all)
}

// runOrder orders jobs so that each comes after the jobs of the set it
// reads (by name), ties by name; a cycle is a usage error.
func runOrder(jobs []*job.Job) ([]*job.Job, error) {
	byName := map[string]*job.Job{}
	for _, j := range jobs {
		byName[j.Name] = j
	}
	done := map[string]bool{}
	var out []*job.Job
	left := slices.Clone(jobs)
	slices.SortFunc(left, func(a, b *job.Job) int { return strings.Compare(a.Name, b.Name) })
	for len(left) > 0 {
		next := left[:0]
		moved := false
		for _, j := range left {
			ready := true
			for _, u := range j.Input.Upstream {
				if byName[u] != nil && !done[u] && u != j.Name {
					ready = false
				}
			}
			if ready {
				out = append(out, j)
				done[j.Name] = true
				moved = true
			} else {
				next = append(next, j)
			}
		}
		if !moved {
			names := make([]string, len(next))
			for i, j := range next {
				names[i] = j.Name
			}
			return nil, report.Usage("erase: the jobs %s read each other in a cycle", strings.Join(names, ", "))
		}
		left = next
	}
	return out, nil
}

// readersByUpstream lists, for each job name, the jobs whose snapshots
// recorded reading it as an upstream.
func readersByUpstream(ctx context.Context, q catalog.Querier) (map[string][]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT job, parts FROM idem.snapshots WHERE parts LIKE '%"upstream"%' ORDER BY job`)
	if err != nil {
		return nil, fmt.Errorf("read which jobs read which: %w", catalog.TrimSQLError(err))
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var name string
		var parts sql.NullString
		if err := rows.Scan(&name, &parts); err != nil {
			return nil, err
		}
		p, err := jobkey.ParseParts(parts.String)
		if err != nil {
			continue // not a key this idem reads: no upstream to follow
		}
		for _, u := range p.Upstream {
			if !slices.Contains(out[u.Job], name) {
				out[u.Job] = append(out[u.Job], name)
			}
		}
	}
	return out, rows.Err()
}
