// Package source owns turning a job's input into the relation its steps
// read: resolving paths and globs into files and hashing them, inferring
// their format, the content-addressed store of retained inputs beside the
// database (retain, verify, sweep, and rewriting a retained file without
// erased rows), staging CSV, JSONL and Parquet as the temp view input with
// the messages of a bad input, and the input modes that pick what a run
// reads: the pending files of a files-mode job and the chunks of a chunked
// one. A stream input (stream.go, streambatch.go) reads a batch of records
// past the positions committed in idem.positions through a StreamReader
// (kafka.go: franz-go, direct partition consumption; sse*.go: server-sent
// events) and stages it as one retained JSONL file. An upstream input
// (upstream*.go) reads another job's table pinned at a snapshot, or the
// rows it changed between two.
//
// A kind of input implements Input (input.go); the run resolves, retains
// and stages it. Source reads idem's tables only through catalog; it never
// begins or commits a transaction, and never imports run or ops.
package source
