// Package planner owns idem plan: what a run of a job would decide,
// computed by the run's own guards in a transaction it rolls back on the
// database opened read-only (plan.go), and, for a model, how its new SQL
// changes what it builds: the columns added, dropped or retyped and
// whether the change is breaking (plan_model.go). Nothing is written.
//
// Environments build on it (a job is rebuilt in an environment when its
// plan says so).
package planner
