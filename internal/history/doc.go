// Package history owns the commands that replay or rewrite a job's history
// of snapshots: idem rerun (each snapshot rebuilt in a scratch database
// from its retained inputs, or from a checkpoint, and its sha256 compared;
// rerun.go), erase (one job's rows, history, retained inputs and release
// packets, erase.go; the cascade through the jobs downstream, erase_chain.go;
// the journal beside the database that refuses a restored copy lacking an
// erasure, erase_journal.go), rollback, expire (snapshots, retained inputs
// and checkpoints past a job's retention, and what downstream jobs pin),
// a full refresh of an apply job, log and fence.
//
// These are one package because they lean on each other: a rerun replays
// the erasures and rollbacks it meets, an erasure recomputes models as
// they ran for their snapshots (ModelAt) and compacts the file, expire
// keeps what a rerun needs.
package history
