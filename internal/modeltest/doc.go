// Package modeltest runs the unit tests of models (idem test): a test file
// names a model (a job with pipeline = "select"), gives the rows of each
// upstream it reads and the rows its result must hold. Each test replays
// the model's real steps in a scratch database of its own, in a temporary
// folder, with each upstream's rows given as the Parquet file that
// {{upstream:NAME}} reads (as idem rerun replays a snapshot): the same
// sealing checks, the same single-threaded steps and the same key check
// as a run. The project's database is only opened read-only, for the
// types of an upstream model's columns as last committed (a column the
// given rows leave out); it is never written. An upstream model that never
// committed is typed by DESCRIBE of its SELECT (describe.go).
//
// It sits beside ops: it uses job, project, catalog, source and run, and
// knows nothing of cobra or terminals.
package modeltest
