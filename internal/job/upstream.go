package job

import (
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/sqltext"
)

// applyUpstream validates [input] upstream: names of other jobs, each once,
// and not together with a file input unless the pipeline reads both.
func (j *Job) applyUpstream(data []byte, jf *jobFile) error {
	bad := jobfs.KeyErrors(j.File, data)
	ups := jf.Input.Upstream
	seen := map[string]bool{}
	for _, u := range ups {
		switch {
		case !sqltext.Identifier.MatchString(u):
			return bad("input.upstream", "upstream %q is not a job name (letters, digits and underscores, starting with a letter)", u)
		case u == j.Name:
			return bad("input.upstream", "job %s cannot read itself as an upstream", u)
		case seen[u]:
			return bad("input.upstream", "upstream %s is named twice", u)
		}
		seen[u] = true
	}
	if j.Pipeline.Model {
		ups = j.modelUpstreams(jf)
	}
	p := j.Pipeline
	if len(ups) > 0 && jf.Input.Path != "" && !(slices.Contains(p.Reads, pipeline.ReadsFiles) && slices.Contains(p.Reads, pipeline.ReadsUpstream)) {
		return bad("input.upstream", "a job reads files ([input] path) or upstream jobs, not both, unless its pipeline declares reads = [%q, %q] (pipeline %s does not)",
			pipeline.ReadsFiles, pipeline.ReadsUpstream, p.Name)
	}
	if p.Model && len(ups) == 0 && jf.Input.Path != "" {
		return bad("input.path", "a model reads upstream jobs, not files: declare [input] upstream = [\"JOB\"] and read it with {{upstream:JOB}}")
	}
	if len(ups) > 0 && len(jf.Quality.Rules) > 0 && jf.Input.Path == "" {
		return bad("quality.rules", "quality rules check the rows of a file input; this job reads only upstream jobs")
	}
	if len(ups) > 0 && (jf.Input.Mode != "" || jf.Input.ChunkRows > 0) {
		return bad("input.upstream", "upstream inputs do not combine with [input] mode or chunk_rows")
	}
	j.Input.Upstream = slices.Clone(ups)
	// Every {{upstream:NAME}} a step reads is declared (the template
	// expansion in applyExtensions reports it with the step's name).
	return nil
}

// ReadsUpstream says whether the job reads upstream jobs.
func (j *Job) ReadsUpstream() bool { return len(j.Input.Upstream) > 0 }

// ReadsFiles says whether the job reads a file input: every job but one
// that declares only upstream inputs, and a model, which reads its
// upstreams or nothing at all (a calendar made from range()).
func (j *Job) ReadsFiles() bool {
	if j.Pipeline != nil && j.Pipeline.Model {
		return j.Input.Path != ""
	}
	return !j.ReadsUpstream() || j.Input.Path != ""
}

// SortedUpstream lists the job's upstream jobs by name: the order of the
// key's input part.
func (j *Job) SortedUpstream() []string {
	out := slices.Clone(j.Input.Upstream)
	slices.Sort(out)
	return out
}

// modelUpstreams are a model's upstream jobs: those its SQL reads through
// {{upstream:NAME}} (or {{ ref('NAME') }}), with its sql audits', when
// [input] upstream is left out; else the declared ones, which must agree
// with them: a read of a job not declared is reported where the
// placeholder expands, a declared job no text reads by checkDeclaredReads.
func (j *Job) modelUpstreams(jf *jobFile) []string {
	if len(jf.Input.Upstream) > 0 {
		return jf.Input.Upstream
	}
	return modelReads(j.ModelSQL, jf.Audit)
}

// checkDeclaredReads refuses a model's declared upstream that neither its
// SQL nor a sql audit reads, naming the file, the line of [input] upstream
// and the job, unless a relationships audit checks against it (declaring
// it pins the rows that audit reads, and reruns the model when they
// change). It runs after the job file's other checks, whose errors say
// more about the same mistake.
func (j *Job) checkDeclaredReads(data []byte, jf *jobFile) error {
	if !j.Pipeline.Model || len(jf.Input.Upstream) == 0 {
		return nil
	}
	reads := modelReads(j.ModelSQL, jf.Audit)
	for _, a := range jf.Audit {
		if other, _, _ := strings.Cut(a.To, "."); a.Kind == AuditRelationships {
			reads = append(reads, other)
		}
	}
	for _, u := range jf.Input.Upstream {
		if !slices.Contains(reads, u) {
			return jobfs.KeyErrors(j.File, data)("input.upstream", "upstream %s is declared but model %s never reads it: read it with {{upstream:%s}} (or {{ ref('%s') }}), or drop it from [input] upstream (a model's upstreams come from its SQL when [input] upstream is left out)",
				u, j.Name, u, u)
		}
	}
	return nil
}

// modelReads are the upstream jobs a model's text and its sql audits read.
func modelReads(model string, audits []Audit) []string {
	reads := ModelUpstreams(model)
	for _, a := range audits {
		for _, u := range ModelUpstreams(a.SQL) {
			if !slices.Contains(reads, u) {
				reads = append(reads, u)
			}
		}
	}
	return reads
}
