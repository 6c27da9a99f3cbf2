package job

import (
	"errors"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Input modes and batch shapes of [input] mode = "files".
const (
	InputModeFiles = "files"
	// InputModeReplace is a file that is the whole table (a reference
	// table): each changed file replaces the target.
	InputModeReplace = "replace"
	BatchPerFile     = "per_file"
	BatchAll         = "all"
)

// Rule is one [[quality.rules]] entry: a boolean SQL expression over the
// columns of the staged table. A row for which it is not true (false or
// NULL) gets outcome invalid_rule:<name>.
type Rule struct {
	Name string `toml:"name" json:"name"`
	SQL  string `toml:"sql" json:"sql"`
}

type qualityTable struct {
	Rules []Rule `toml:"rules"`
}

// applyExtensions validates and binds the parts of a job file beyond the
// core: job-declared columns of a generic pipeline, the files and chunked
// input modes, and quality rules. Errors are *JobFileError.
func (j *Job) applyExtensions(data []byte, md toml.MetaData, jf *jobFile) error {
	bad := jobfs.KeyErrors(j.File, data)
	switch {
	case j.Pipeline.Generic:
		if err := j.applyGenericShape(data, md, jf, bad); err != nil {
			return err
		}
	case j.Pipeline.Model:
		if err := j.modelKey(data, jf); err != nil {
			return err
		}
	case len(jf.Input.Columns) > 0:
		return bad("input.columns", "pipeline %s declares its own input columns", j.Pipeline.Name)
	case len(jf.Target.Key) > 0:
		return bad("target.key", "pipeline %s declares its own key", j.Pipeline.Name)
	case jf.Target.OrderBy != "":
		return bad("target.order_by", "pipeline %s declares its own ordering", j.Pipeline.Name)
	}
	if err := j.checkTemplates(bad); err != nil {
		return err
	}
	if err := j.applyInputMode(md, jf, bad); err != nil {
		return err
	}
	return j.applyRules(data, jf)
}

// applyGenericShape binds a generic pipeline's shape from the job:
// [input.columns] in file order, [target] key and order_by. The job gets
// its own copy of the pipeline carrying its columns and key, so staging and
// history read them like a built-in's.
func (j *Job) applyGenericShape(data []byte, md toml.MetaData, jf *jobFile, bad jobfs.KeyErrorFunc) error {
	p := j.Pipeline
	cols, err := declaredColumns(md, jf, p, bad)
	if err != nil {
		return err
	}
	j.Columns = cols
	if len(jf.Target.Key) == 0 {
		return &report.JobFileError{File: j.File, Line: jobfs.KeyLine(data, "target"), Key: "target.key",
			Msg: fmt.Sprintf("pipeline %s needs the key columns: add key = [\"...\"] to [target] (rows would double on replay)", p.Name), Err: report.ErrNoKey}
	}
	seen := map[string]bool{}
	shape := &pipeline.Shape{Columns: j.Columns}
	for _, k := range jf.Target.Key {
		if shape.TypeOf(k) == "" {
			return bad("target.key", "key column %q is not one of [input.columns]", k)
		}
		if seen[k] {
			return bad("target.key", "key column %q is named twice", k)
		}
		seen[k] = true
	}
	j.Key = jf.Target.Key
	if o := jf.Target.OrderBy; o != "" {
		if shape.TypeOf(o) == "" {
			return bad("target.order_by", "ordering column %q is not one of [input.columns]", o)
		}
		if seen[o] {
			return bad("target.order_by", "ordering column %q is a key column", o)
		}
		j.OrderBy = o
	}
	if len(j.shape().Payload()) == 0 {
		return bad("input.columns", "declare at least one column besides the key and the ordering column")
	}
	cp := *p
	cp.Columns = j.Columns
	cp.Key = j.Key
	j.Pipeline = &cp
	return nil
}

// declaredColumns reads [input.columns] in file order: names that are
// identifiers and not reserved, types from the whitelist (canonicalType).
func declaredColumns(md toml.MetaData, jf *jobFile, p *pipeline.Pipeline, bad jobfs.KeyErrorFunc) ([]pipeline.Column, error) {
	if len(jf.Input.Columns) == 0 {
		return nil, bad("input.columns", "pipeline %s takes its input columns from the job: add [input.columns] name = \"TYPE\"", p.Name)
	}
	var cols []pipeline.Column
	for _, k := range md.Keys() {
		if len(k) != 3 || k[0] != "input" || k[1] != "columns" {
			continue
		}
		name := k[2]
		key := "input.columns." + name
		if !sqltext.Identifier.MatchString(name) {
			return nil, bad(key, "column name %q must be letters, digits and underscores, starting with a letter", name)
		}
		if name[0] == '_' || strings.HasPrefix(strings.ToLower(name), "idem") {
			return nil, bad(key, "column names starting with _ or idem are reserved")
		}
		typ, err := canonicalType(jf.Input.Columns[name])
		if err != nil {
			return nil, bad(key, "%v", err)
		}
		cols = append(cols, pipeline.Column{Name: name, Type: typ})
	}
	return cols, nil
}

// checkTemplates expands every file of the job once, so that a bad
// placeholder is a job-file error rather than a failed run.
func (j *Job) checkTemplates(bad jobfs.KeyErrorFunc) error {
	for _, s := range j.Steps {
		if _, err := pipeline.ExpandTemplate(s.SQL, j.Table, j.shape(), j.Input.Upstream); err != nil {
			return bad("pipeline", "step %s: %v", s.Name, err)
		}
	}
	if _, err := pipeline.ExpandTemplate(j.DDL, j.Table, j.shape(), j.Input.Upstream); err != nil {
		return bad("pipeline", "schema v%d: %v", j.SchemaVersion, err)
	}
	return nil
}

// applyInputMode binds [input] mode and batch (files mode) and chunk_rows
// and watermark (chunked input), each for an apply pipeline only.
func (j *Job) applyInputMode(md toml.MetaData, jf *jobFile, bad jobfs.KeyErrorFunc) error {
	p := j.Pipeline
	in := jf.Input
	switch in.Mode {
	case "":
		if in.Batch != "" {
			return bad("input.batch", "batch applies to mode = \"files\"")
		}
	case InputModeFiles:
		if p.Mode != pipeline.ModeApply {
			return bad("input.mode", "mode = \"files\" needs an apply pipeline; %s is a %s pipeline", p.Name, p.Mode)
		}
		switch in.Batch {
		case "":
			in.Batch = BatchPerFile
		case BatchPerFile, BatchAll:
		default:
			return bad("input.batch", "must be %q or %q (got %q)", BatchPerFile, BatchAll, in.Batch)
		}
	case InputModeReplace:
		if p.Mode != pipeline.ModeApply || !p.Generic {
			return bad("input.mode", "mode = \"replace\" takes a generic apply pipeline such as merge_by_key, not %s", p.Name)
		}
		if in.Batch != "" {
			return bad("input.batch", "batch applies to mode = \"files\"")
		}
	default:
		return bad("input.mode", "must be %q, %q or absent (got %q)", InputModeFiles, InputModeReplace, in.Mode)
	}
	if md.IsDefined("input", "chunk_rows") || in.Watermark != "" {
		if err := checkChunks(p, in, bad); err != nil {
			return err
		}
	}
	switch {
	case in.Conflicts == "" && in.Mode == InputModeReplace:
		in.Conflicts = ConflictsRefuse
	case in.Conflicts != "" && in.Mode != InputModeReplace:
		return bad("input.conflicts", "applies to a seed (mode = \"replace\")")
	case in.Conflicts != "" && in.Conflicts != ConflictsRefuse && in.Conflicts != ConflictsKeep:
		return bad("input.conflicts", "must be %q or %q (got %q)", ConflictsRefuse, ConflictsKeep, in.Conflicts)
	}
	j.Input.Conflicts = in.Conflicts
	j.Input.Mode, j.Input.Batch = in.Mode, in.Batch
	j.Input.ChunkRows, j.Input.Watermark = in.ChunkRows, in.Watermark
	return nil
}

// checkChunks checks chunked input: a positive chunk_rows, an integer
// watermark column of the pipeline's input, an apply pipeline, no files
// mode.
func checkChunks(p *pipeline.Pipeline, in inputTable, bad jobfs.KeyErrorFunc) error {
	if in.ChunkRows < 1 {
		return bad("input.chunk_rows", "must be a positive number of rows")
	}
	if in.Watermark == "" {
		return bad("input.watermark", "chunk_rows needs watermark = \"<column>\": the column the chunks are ordered by")
	}
	if in.Mode != "" {
		return bad("input.chunk_rows", "chunked input and mode = \"files\" do not combine")
	}
	if p.Mode != pipeline.ModeApply {
		return bad("input.chunk_rows", "chunked input needs an apply pipeline; %s is a %s pipeline", p.Name, p.Mode)
	}
	typ := ""
	for _, c := range p.Columns {
		if c.Name == in.Watermark {
			typ = strings.ToUpper(c.Type)
		}
	}
	if typ == "" {
		return bad("input.watermark", "watermark column %q is not an input column of %s (%s)", in.Watermark, p.Name, strings.Join(p.ColumnNames(), ", "))
	}
	if !integerTypes[typ] {
		return bad("input.watermark", "watermark column %q has type %s; a watermark is an integer column", in.Watermark, typ)
	}
	return nil
}

// applyRules checks [[quality.rules]] names and text. Proving the rules
// needs DuckDB: run.ParseJob does it, last.
func (j *Job) applyRules(data []byte, jf *jobFile) error {
	names := map[string]bool{}
	for i, r := range jf.Quality.Rules {
		loc := func(msg string, args ...any) error {
			return &report.JobFileError{File: j.File, Line: jobfs.RuleLine(data, i), Key: fmt.Sprintf("quality.rules[%d]", i+1), Msg: fmt.Sprintf(msg, args...)}
		}
		if !sqltext.Identifier.MatchString(r.Name) {
			return loc("rule name %q must be letters, digits and underscores, starting with a letter", r.Name)
		}
		if names[r.Name] {
			return loc("rule %s is declared twice", r.Name)
		}
		names[r.Name] = true
		if strings.TrimSpace(r.SQL) == "" {
			return loc("rule %s: sql is empty", r.Name)
		}
	}
	if len(jf.Quality.Rules) > 0 {
		j.Rules = jf.Quality.Rules
	}
	return j.applyAudits(data, jf.Audit)
}

// extendConfig adds to the config part of the job key what this file's
// extensions let a job say that shapes rows. Jobs that use none of them
// keep the key they had.
func (j *Job) extendConfig(c map[string]any) {
	if len(j.Columns) > 0 {
		cols := make([][]string, len(j.Columns))
		for i, col := range j.Columns {
			cols[i] = []string{col.Name, col.Type}
		}
		c["columns"] = cols
		c["key"] = j.Key
		c["order_by"] = j.OrderBy
	}
	if j.Pipeline.Model {
		c["key"] = j.Key
	}
	if len(j.Rules) > 0 {
		c["rules"] = j.Rules
	}
	if j.PartitionBy != "" {
		c["partition_by"] = j.PartitionBy
	}
	if j.Input.Mode != "" {
		c["input_mode"] = map[string]any{"mode": j.Input.Mode, "batch": j.Input.Batch}
	}
	if j.Input.ExtraColumns == ExtraIgnore {
		// Only the non-default setting is recorded, so jobs that never set
		// it keep their keys.
		c["extra_columns"] = ExtraIgnore
	}
	j.icebergConfig(c) // iceberg.go
	if s := j.Input.Stream; s.Kind != "" {
		// What rows land: the kind and the topic. Brokers, url and the
		// batch limits are where and how fast (stream.go).
		c["stream"] = map[string]any{"kind": s.Kind, "topic": s.Topic}
	}
	if j.Input.ChunkRows > 0 {
		c["chunks"] = map[string]any{"rows": j.Input.ChunkRows, "watermark": j.Input.Watermark}
	}
}

// schemaDigest is the schema part's sha256: of the DDL file, or for a
// generic pipeline of the DDL expanded with the job's columns, so that a
// change of declared columns rebuilds the target.
func (j *Job) schemaDigest() string {
	if j.Pipeline.Model {
		return "" // the run describes the SELECT's result (ModelSchemaPart)
	}
	if j.Pipeline.Generic {
		return pipeline.DigestString(j.Expand(j.DDL))
	}
	return pipeline.DigestString(j.DDL)
}

// RestoreShape sets a generic pipeline's columns, key and ordering column
// to the ones recorded in a snapshot's config part, so a rebuild uses the
// shape the snapshot was built with, whatever the job file says now.
func (j *Job) RestoreShape(config map[string]any) error {
	if !j.Pipeline.Generic {
		return nil
	}
	cols, ok := config["columns"].([]any)
	if !ok {
		return errors.New("no recorded columns for a generic pipeline")
	}
	j.Columns = make([]pipeline.Column, 0, len(cols))
	for _, c := range cols {
		pair, ok := c.([]any)
		if !ok || len(pair) != 2 {
			return fmt.Errorf("recorded column %v is not [name, type]", c)
		}
		name, _ := pair[0].(string)
		typ, _ := pair[1].(string)
		j.Columns = append(j.Columns, pipeline.Column{Name: name, Type: typ})
	}
	j.Key = nil
	keys, _ := config["key"].([]any)
	for _, k := range keys {
		name, _ := k.(string)
		j.Key = append(j.Key, name)
	}
	j.OrderBy, _ = config["order_by"].(string)
	cp := *j.Pipeline
	cp.Columns, cp.Key = j.Columns, j.Key
	j.Pipeline = &cp
	return nil
}
