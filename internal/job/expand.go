package job

import "github.com/idem-dev/idem/internal/pipeline"

// Expand expands the placeholders of a step or schema file for this job.
// The job's files were expanded once when it was loaded, so an unknown
// placeholder was already reported there.
func (j *Job) Expand(text string) string {
	out, _ := pipeline.ExpandTemplate(text, j.Table, j.shape(), j.Input.Upstream)
	return out
}

// shape is the job-declared shape of a generic pipeline, or nil.
func (j *Job) shape() *pipeline.Shape {
	if j.Pipeline.Model {
		// A model's columns are its SELECT's: only the key is known.
		return &pipeline.Shape{Key: j.Key}
	}
	if !j.Pipeline.Generic {
		return nil
	}
	return &pipeline.Shape{Columns: j.Columns, Key: j.Key, Order: j.OrderBy}
}
