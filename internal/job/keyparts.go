package job

import (
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"slices"
)

// TransformPart is the transform part of job's key. Run, plan and rerun
// all compute it here, so a rerun checks exactly what a run recorded.
//
// The macros the job uses (macro.go) are hashed after the steps, as files
// named macros/NAME.sql; a job that uses none hashes its steps alone, so
// its key is what it was before macros existed.
func (j *Job) TransformPart() jobkey.TransformPart {
	steps := j.Steps
	if len(j.Macros) > 0 {
		steps = append(slices.Clip(steps), j.macroSteps()...)
	}
	return jobkey.TransformPart{Pipeline: j.Pipeline.Name, Version: j.TransformVersion, SHA256: pipeline.StepsDigest(steps)}
}

// SchemaPart is the schema part of job's key (see schemaDigest: a generic
// pipeline's DDL is hashed as expanded with the job's columns). Run, plan
// and rerun all compute it here.
func (j *Job) SchemaPart() jobkey.SchemaPart {
	return jobkey.SchemaPart{Version: j.SchemaVersion, SHA256: j.schemaDigest()}
}

// Config is the config part of the key: everything in the job that shapes
// rows. Never the database path or connection settings.
func (j *Job) Config(format string) map[string]any {
	c := map[string]any{
		"params": j.Params,
		"target": j.Table,
		"format": format,
	}
	j.extendConfig(c) // job-declared columns, input mode, rules (jobext.go)
	return c
}
