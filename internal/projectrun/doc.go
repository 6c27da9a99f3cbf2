// Package projectrun runs a project: every job of a project.Project in run
// order, each in its own transaction, a job downstream of one that failed
// or was refused blocked and not run, each job started once the jobs it
// reads are done, up to a limit (of one database file or several: a
// handle lets one writing transaction in at a time). Handles keeps one
// open handle per database file, shared by the jobs that use it.
//
// What a job's run is (run, plan, a stream batch) and what is printed is
// the caller's: the idem command and the public package runner both run
// their projects through Run. It imports job, project and run, never
// source or catalog.
package projectrun
