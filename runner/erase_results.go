package runner

// The results of Erase and ReplayJournal: the JSON keys are those of idem
// erase --json, kept in step with the internal types by
// TestResultsInStep.

// ChainEraseResult reports an erasure through the chain of jobs. The JSON
// keys are those of idem erase PROJECT_DIR --json; Root gives idem erase
// JOB's.
type ChainEraseResult struct {
	// Erased are the jobs the subject was removed from by its columns, in
	// run order (the jobs named first, then the jobs that read them).
	Erased []*EraseResult `json:"erased"`
	// Recomputed are the models rebuilt from their upstreams' rows
	// without the subject, for every kept snapshot.
	Recomputed []*RecomputeResult `json:"recomputed"`
	// Untouched are the jobs that read an erased job and held none of
	// the subject's rows.
	Untouched []string `json:"untouched"`
	// NotHeld are the jobs of a project folder that declare the subject
	// and held none of it: nothing was erased there.
	NotHeld []string `json:"not_held"`
	// DryRun says nothing was committed: the lists say what would be.
	DryRun  bool         `json:"dry_run"`
	Replica *ReplicaInfo `json:"replica,omitempty"`
	// Compact reports the compaction of the database file after the
	// erasure; nil with NoCompact, or when nothing changed.
	Compact *CompactResult `json:"compact,omitempty"`

	// Database is the database file erased from.
	Database string `json:"-"`
	changed  bool
}

// Changed says the erasure committed a change: one that found the
// subject erased before, or a dry run, changed nothing.
func (r *ChainEraseResult) Changed() bool { return r.changed }

// Root is the erasure as idem erase JOB --json prints it: the job named,
// with the erasures of its readers under Downstream.
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

// snapshotOf is job name's new snapshot: 0 for a job the erasure did not
// change.
func (r *ChainEraseResult) snapshotOf(name string) int64 {
	for _, e := range r.Erased {
		if e.Job == name {
			return e.Snapshot
		}
	}
	for _, m := range r.Recomputed {
		if m.Job == name {
			return m.Snapshot
		}
	}
	return 0
}

// EraseResult is the erasure of one job by the subject's columns or its
// key. The JSON keys are those of idem erase JOB --json.
type EraseResult struct {
	Job string `json:"job"`
	// Key is the key value erased; with a Subject, SubjectColumns are the
	// columns it was looked for in and Keys the values of the key its rows
	// had.
	Key            string   `json:"key"`
	Subject        string   `json:"subject,omitempty"`
	SubjectColumns []string `json:"subject_columns,omitempty"`
	Keys           []string `json:"keys,omitempty"`
	// KeyColumns name the columns of a composite key: Key is then the
	// JSON array of their values, in this order.
	KeyColumns []string `json:"key_columns,omitempty"`
	Snapshot   int64    `json:"snapshot"`
	Parent     int64    `json:"parent"`
	// Position is the erasure point: a later batch carrying the key at or
	// below it gets outcome erased; nil for a job without a position
	// column.
	Position *int64 `json:"position"`
	// Removed counts the rows removed per table; history counts every
	// snapshot's version of the rows.
	Removed map[string]int64 `json:"removed"`
	Inputs  []RewrittenInput `json:"inputs"`
	// Packets are the snapshots whose release packet was rewritten.
	Packets []int64 `json:"packets_rewritten,omitempty"`
	// AlreadyErased says the key was erased before and found nowhere:
	// nothing was committed and Snapshot is the latest.
	AlreadyErased bool `json:"already_erased"`
	// Downstream, Recomputed, Untouched, DryRun, Replica and Compact are
	// set on Root's result only.
	Downstream []*EraseResult     `json:"downstream,omitempty"`
	Recomputed []*RecomputeResult `json:"recomputed,omitempty"`
	Untouched  []string           `json:"untouched,omitempty"`
	DryRun     bool               `json:"dry_run,omitempty"`
	Replica    *ReplicaInfo       `json:"replica,omitempty"`
	Compact    *CompactResult     `json:"compact,omitempty"`
}

// RewrittenInput is a retained input file rewritten without the erased
// rows and stored under its new sha256.
type RewrittenInput struct {
	Old         string `json:"old_sha256"`
	New         string `json:"new_sha256"`
	Bytes       int64  `json:"bytes"`
	RowsRemoved int64  `json:"rows_removed"`
}

// RecomputeResult is a model rebuilt by an erasure: its new snapshot and,
// for each kept snapshot, the rows it held before and holds now.
type RecomputeResult struct {
	Job       string              `json:"job"`
	Snapshot  int64               `json:"snapshot"`
	Parent    int64               `json:"parent"`
	Snapshots []RecomputeSnapshot `json:"snapshots"`
	// Packets are the snapshots whose release packet was rewritten.
	Packets []int64 `json:"packets_rewritten,omitempty"`
}

// RecomputeSnapshot is one kept snapshot of a recomputed model.
type RecomputeSnapshot struct {
	Snapshot   int64 `json:"snapshot"`
	RowsBefore int64 `json:"rows_before"`
	RowsAfter  int64 `json:"rows_after"`
}

// JournalReplay reports ReplayJournal. The JSON keys are those of idem
// erase --replay-journal --json.
type JournalReplay struct {
	Replayed []JournalReplayed `json:"replayed"`
	// Compact reports the compaction after it.
	Compact *CompactResult `json:"compact,omitempty"`

	// Database is the database file replayed into.
	Database string `json:"-"`
}

// JournalReplayed is one journal erasure applied again: the erasures
// through the chain of each value found for it, or, when the database
// holds nothing of it, only its record (RecordOnly).
type JournalReplayed struct {
	Job        string              `json:"job"`
	Subject    []string            `json:"subject_columns,omitempty"`
	ErasedAt   string              `json:"erased_at"`
	Erasures   []*ChainEraseResult `json:"erasures"`
	RecordOnly bool                `json:"record_only"`
}
