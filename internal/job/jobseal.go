package job

import (
	"fmt"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
	"path/filepath"
	"strings"
)

// idemTemp are the temporary relations idem or the step contract makes
// that a step may read and write.
var idemTemp = []string{"input", "staged", "outcomes", "idem_erased", "idem_touched"}

// Seal returns what the job's SQL may read and write.
func (j *Job) Seal() *seal.Seal {
	s := &seal.Seal{Own: map[string]bool{strings.ToLower(j.Table): true}, Temp: map[string]bool{},
		Upstream: map[string]bool{}, Declared: map[string]bool{}}
	if j.Pipeline != nil && j.Pipeline.Mode == pipeline.ModeRefresh && j.PartitionBy == "" && j.Incremental == "" {
		s.Fresh = strings.ToLower(j.Table)
	}
	if t := j.Pipeline.OutcomesTable; t != "" {
		s.Own[strings.ToLower(j.Table+t)] = true
	}
	for _, n := range idemTemp {
		s.Temp[n] = true
	}
	for _, text := range j.sealTexts() {
		for _, m := range pipeline.Companion.FindAllStringSubmatch(text, -1) {
			s.Own[strings.ToLower(j.Table+m[1])] = true
		}
		for _, n := range sqltext.TempRelations(j.Expand(text)) {
			s.Temp[n] = true
		}
	}
	for _, u := range j.Input.Upstream {
		s.Upstream[strings.ToLower(seal.UpstreamRelation(u))] = true
		s.Declared[strings.ToLower(u)] = true
	}
	for n := range s.Upstream {
		s.Declared[n] = true
	}
	s.Macros = j.macroNames()
	return s
}

// sealTexts are the job's SQL texts: its schema file and its steps.
func (j *Job) sealTexts() []string {
	texts := []string{j.DDL}
	for _, st := range j.Steps {
		texts = append(texts, st.SQL)
	}
	return texts
}

// SealedTexts are the job's SQL texts as the run executes them: the schema
// file and each step, expanded.
func (j *Job) SealedTexts() []seal.SealedText {
	var out []seal.SealedText
	if strings.TrimSpace(j.DDL) != "" && !j.IsModel() {
		out = append(out, seal.SealedText{File: "schema v" + fmt.Sprint(j.SchemaVersion), SQL: j.Expand(j.DDL)})
	}
	for _, st := range j.Steps {
		t := seal.SealedText{File: st.Name, SQL: j.Expand(st.SQL), Step: true}
		if j.ModelSQL != "" {
			model := j.Expand(j.ModelSQL)
			if i := strings.Index(t.SQL, model); i >= 0 {
				t.Model, t.ModelFile = sqltext.Span{Start: i, End: i + len(model)}, j.modelFileShown()
			}
		}
		out = append(out, t)
	}
	for _, a := range j.Audits {
		if a.Kind == AuditSQL {
			out = append(out, seal.SealedText{File: "audit " + a.Name, SQL: j.Expand(a.SQL)})
		}
	}
	return append(out, j.macroTexts()...)
}

// modelFileShown is the model's file as messages name it: relative to the
// job file's folder when it lies below it.
func (j *Job) modelFileShown() string {
	if j.File != "" {
		if rel, err := filepath.Rel(filepath.Dir(j.File), j.ModelFile); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
	}
	return j.ModelFile
}
