package report

// Decisions a run can report and the run log records.
const (
	DecisionLoaded           = "loaded"
	DecisionApplied          = "applied"
	DecisionSkipped          = "skipped"
	DecisionAlreadyCommitted = "already_committed"
	DecisionRefused          = "refused"
	DecisionFailed           = "failed"
)

// Snapshot kinds beyond the run decisions (loaded, applied): an erasure and
// a rollback each commit a snapshot of their own, and so does run
// --full-refresh of an apply job (its target rebuilt from every batch).
const (
	KindErase       = "erase"
	KindRollback    = "rollback"
	KindFullRefresh = "full_refresh"
)
