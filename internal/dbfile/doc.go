// Package dbfile owns the database file as a whole: idem compact (a
// rewrite of the file, checked table by table and against every job's
// latest export, then swapped in) and idem backup and its verification
// (the file and its retained inputs copied with a manifest written last).
//
// It works on a *run.DB or a path and reads jobs' exports through export.
package dbfile
