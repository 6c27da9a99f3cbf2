package history

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/dbfile"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
)

// JournalReplay reports idem erase --replay-journal: each erasure the
// journal records that the database lacked, and what applying it again
// did.
type JournalReplay struct {
	Replayed []JournalReplayed `json:"replayed"`
	// Compact reports the compaction after it (CompactAfterErasure).
	Compact *dbfile.CompactResult `json:"compact,omitempty"`
}

// JournalReplayed is one journal erasure applied again: the erasures
// through the chain of each value found for it, or, when the database
// holds nothing of it, only its record.
type JournalReplayed struct {
	Job      string              `json:"job"`
	Subject  []string            `json:"subject_columns,omitempty"`
	ErasedAt string              `json:"erased_at"`
	Erasures []*ChainEraseResult `json:"erasures"`
	// RecordOnly says the database held no row of the erased value: the
	// erasure is recorded so that the journal and the database agree.
	RecordOnly bool `json:"record_only"`
}

// ReplayJournal applies again, each through the chain as idem erase does,
// the erasures the journal beside the database records and the database
// lacks (a restore from a copy taken before them). The erased values are
// not in the journal, only their salted hash: they are found by hashing
// the values of the erasure's columns in the job's tables. d must be
// opened with run.JournalSkip; jobs are the job files of the database's
// jobs, the erased ones and their readers.
func ReplayJournal(ctx context.Context, d *run.DB, jobs []*job.Job, fault func(string)) (*JournalReplay, error) {
	missing, err := d.JournalGap(ctx)
	if err != nil {
		return nil, err
	}
	res := &JournalReplay{Replayed: []JournalReplayed{}}
	// Upstream jobs first: erasing there erases through the chain, which
	// may record the readers' entries too.
	order, err := runOrder(jobs)
	if err != nil {
		return nil, err
	}
	rank := func(name string) int {
		return slices.IndexFunc(order, func(j *job.Job) bool { return j.Name == name })
	}
	slices.SortStableFunc(missing, func(a, b run.JournalEntry) int { return cmp.Compare(rank(a.Job), rank(b.Job)) })
	for _, e := range missing {
		still, err := d.JournalGap(ctx)
		if err != nil {
			return res, err
		}
		if !slices.ContainsFunc(still, func(m run.JournalEntry) bool {
			return m.Job == e.Job && m.SHA256 == e.SHA256 && slices.Equal(m.Subject, e.Subject)
		}) {
			continue
		}
		i := slices.IndexFunc(jobs, func(j *job.Job) bool { return j.Name == e.Job })
		if i < 0 {
			return res, report.Usage("erase --replay-journal: the journal records an erasure of job %s, and no job file of it was given", e.Job)
		}
		j := jobs[i]
		cols := e.Subject
		if len(cols) == 0 {
			if cols = keyColumns(j); len(cols) == 0 {
				return res, report.Usage("erase --replay-journal: the journal records an erasure of a key of job %s, which has no key", e.Job)
			}
		}
		values, err := journalValues(ctx, d, j, cols, e, len(e.Subject) == 0 && len(cols) > 1)
		if err != nil {
			return res, err
		}
		r := JournalReplayed{Job: e.Job, Subject: e.Subject, ErasedAt: e.ErasedAt, Erasures: []*ChainEraseResult{}}
		for _, v := range values {
			opts := EraseOptions{Key: v, Fault: fault}
			if len(e.Subject) > 0 {
				opts = EraseOptions{Subject: v, SubjectColumns: e.Subject, Fault: fault}
			}
			cr, err := EraseChain(ctx, d, []*job.Job{j}, jobs, opts)
			if err != nil {
				return res, fmt.Errorf("erase --replay-journal: %w", err)
			}
			r.Erasures = append(r.Erasures, cr)
		}
		if len(values) == 0 {
			if err := recordJournalOnly(ctx, d, e); err != nil {
				return res, err
			}
			r.RecordOnly = true
		}
		res.Replayed = append(res.Replayed, r)
	}
	return res, d.SyncJournal(ctx)
}

// journalValues are the values of cols in job j's tables whose salted hash
// is e's: of any one column for a subject, of all of them (a composite key,
// as KeyOf gives it) when tuple.
func journalValues(ctx context.Context, d *run.DB, j *job.Job, cols []string, e run.JournalEntry, tuple bool) ([]string, error) {
	places, err := jobPlaces(ctx, d.SQL(), j, "")
	if err != nil {
		return nil, fmt.Errorf("erase --replay-journal: %w", err)
	}
	var out []string
	for _, p := range places {
		var sel []string
		for _, c := range cols {
			if p.cols[c] {
				sel = append(sel, "CAST("+sqltext.QuoteIdent(c)+" AS VARCHAR)")
			}
		}
		var queries []string
		switch {
		case tuple && len(sel) == len(cols):
			// The hash is taken below, not in SQL, so that the key's text is
			// KeyOf's to the byte.
			queries = []string{"SELECT DISTINCT CAST(to_json([" + strings.Join(sel, ", ") + "]) AS VARCHAR) FROM " + p.name + " WHERE " + strings.Join(sel, " IS NOT NULL AND ") + " IS NOT NULL"}
		case !tuple:
			for _, v := range sel {
				queries = append(queries, "SELECT DISTINCT "+v+" FROM "+p.name+" WHERE sha256("+sqltext.SQLString(e.Salt)+" || "+v+") = "+sqltext.SQLString(e.SHA256))
			}
		}
		for _, q := range queries {
			texts, err := catalog.Strings(ctx, d.SQL(), q)
			if err != nil {
				return nil, fmt.Errorf("erase --replay-journal: read %s: %w", p.name, err)
			}
			for _, s := range texts {
				if tuple {
					var values []string
					if err := json.Unmarshal([]byte(s), &values); err != nil {
						return nil, fmt.Errorf("erase --replay-journal: read %s: %w", p.name, err)
					}
					data, _ := json.Marshal(values)
					s = string(data)
				}
				if !slices.Contains(out, s) && e.Matches(s) {
					out = append(out, s)
				}
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// recordJournalOnly records journal erasure e in a database that holds
// nothing of it, by its salt and hash.
func recordJournalOnly(ctx context.Context, d *run.DB, e run.JournalEntry) error {
	tx, err := d.SQL().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	st, err := catalog.ReadState(ctx, tx, e.Job)
	if err == nil {
		err = catalog.RecordErasedHash(ctx, tx, e.Job, e.Salt, e.SHA256, nil, st.Snapshot, e.Subject)
	}
	if err != nil {
		return fmt.Errorf("erase --replay-journal: %w", errors.Join(err, tx.Rollback()))
	}
	return tx.Commit()
}
