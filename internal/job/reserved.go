package job

import (
	"fmt"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/sqltext"
	"slices"
	"strings"
)

// runRelations are the temp relations every run has by bare name, whatever
// its pipeline: the input the source stages (a view), and the stage and
// outcomes results the step contract reads.
func runRelations() []string { return []string{"input", "staged", "outcomes"} }

// checkTableName refuses a target (or a companion, {{table:_suffix}}) named
// like a temp relation of the run. DuckDB resolves a bare name in the temp
// schema first, so the steps would read and write the temp relation where
// they mean the target: a target named staged fails with binder errors or
// unbalanced outcomes. The reserved names are runRelations and the temp
// tables and views the job's steps create, compared without case as DuckDB
// compares names. When [target] table is absent the name is the job's, and
// the error names key name.
func (j *Job) checkTableName(bad jobfs.KeyErrorFunc, jf *jobFile) error {
	key := "target.table"
	if jf.Target.Table == "" {
		key = "name"
	}
	const fix = "a bare name in the steps would mean that temp relation, not the target: choose another [target] table"
	reserved := map[string]string{} // lower-case name → the step that creates it, "" the run
	for _, r := range runRelations() {
		reserved[r] = ""
	}
	for _, s := range j.Steps {
		for _, r := range sqltext.TempRelations(s.SQL) {
			if _, ok := reserved[r]; !ok {
				reserved[r] = s.Name
			}
		}
	}
	suffixes := []string{""}
	for _, text := range append([]string{j.DDL}, stepTexts(j.Steps)...) {
		for _, m := range pipeline.Companion.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(suffixes, m[1]) {
				suffixes = append(suffixes, m[1])
			}
		}
	}
	for _, suffix := range suffixes {
		name := strings.ToLower(j.Table + suffix)
		step, ok := reserved[name]
		if !ok {
			continue
		}
		what := fmt.Sprintf("table %q", j.Table)
		if suffix != "" {
			what = fmt.Sprintf("table %q, whose companion {{table:%s}} is %q,", j.Table, suffix, j.Table+suffix)
		}
		if step == "" {
			return bad(key, "%s is reserved: every run has temp relations input, staged and outcomes; %s", what, fix)
		}
		return bad(key, "%s is reserved: step %s of pipeline %s creates a temp relation %s; %s", what, step, j.Pipeline.Name, name, fix)
	}
	return nil
}

// stepTexts lists the steps' SQL.
func stepTexts(steps []pipeline.Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.SQL
	}
	return out
}
