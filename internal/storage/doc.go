// Package storage owns idem du: what a job takes on disk (the database
// file and its WAL, its environments, the bytes and rows of its target,
// history and outcomes, its retained inputs and checkpoints, a published
// Iceberg table's files) and, for each kept snapshot, what expiring it
// would free. It only reads.
package storage
