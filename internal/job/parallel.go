package job

import "strings"

// ParallelSteps reports whether the job's steps may run on DuckDB's
// threads instead of one: when every statement of the run is idem's own
// (a built-in pipeline that is not a model, with no [[quality.rules]] and
// no sql audits), whose output is the same whatever the order rows reach
// it (keys and ranks with no tie left to chance, any_value only of one
// row, input row numbers from a scan in file order), as the tests of each
// built-in with 1, 2 and 4 threads and shuffled inputs show. A model, a
// pipeline from a folder, a rule or an audit is the user's SQL, whose
// aggregates (a sum of DOUBLE) can depend on that order: those steps run
// on one thread (internal/run, sealrun.go).
func (j *Job) ParallelSteps() bool {
	if !strings.HasPrefix(j.Pipeline.Origin(), "builtin:") || j.Pipeline.Model || len(j.Rules) > 0 {
		return false
	}
	for _, a := range j.Audits {
		if a.SQL != "" {
			return false
		}
	}
	return true
}
