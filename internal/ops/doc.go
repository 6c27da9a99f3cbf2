// Package ops owns the commands that are not a run: diff, rerun (a replay in a scratch
// database), erase (through a chain of jobs, with its journal), rollback,
// expire and du, show (release packets), lint,
// plan, query, fence, log, environments (diff --env, promote), scaffold
// (idem init), compact (a rewrite of the database file, checked, then
// swapped in) and backup (the database and its retained inputs, with a
// manifest).
//
// Each command is a function over a *run.DB (or a path) and uses catalog,
// source and run, never another command's internals: what two commands
// share goes down a layer (pinned reads and the export: package export). Ops knows nothing of cobra or terminals.
package ops
