// Package env owns environments: a change built beside production in a
// database file of its own that reads production attached (idem run --env
// NAME, env.go), reviewed against production's rows (idem diff --env,
// env_diff.go) and promoted into it (idem promote, env_promote.go, with
// the check that the job file promoted is the one the environment was
// built from, env_definition.go). Each job is planned (planner) to know
// whether the environment builds it.
package env
