package job

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// transformTable is the job file's [transform] table: the folder of a
// model's SQL (pipeline = "select").
type transformTable struct {
	SQL string `toml:"sql"`
}

var modelFile = regexp.MustCompile(`^v([1-9][0-9]*)\.sql$`)

// modelSteps reads the model a job of a model pipeline names: the file
// v<transform_version>.sql in its [transform] sql folder, one SELECT. The
// pipeline's transform/v1 steps wrap it: {{model}} in them is replaced by
// the model's text, so the transform part's sha256 covers the model.
func modelSteps(path string, data []byte, p *pipeline.Pipeline, jf *jobFile, md toml.MetaData) ([]pipeline.Step, error) {
	bad := jobfs.KeyErrors(path, data)
	ref := jf.Transform.SQL
	if ref == "" {
		return nil, bad("transform.sql", "pipeline %s runs one SELECT from a model file or folder: add [transform] sql = \"models/%s.sql\"", p.Name, jf.Name)
	}
	file, dir, err := modelPath(path, ref)
	if err != nil {
		return nil, bad("transform.sql", "%v", err)
	}
	versioned := md.IsDefined("transform_version")
	switch {
	case file != "" && versioned:
		return nil, bad("transform_version", "model %s is one file, whose version is its text's sha256: remove transform_version (or keep numbered versions v1.sql, v2.sql... in a folder)", ref)
	case file == "" && !versioned:
		return nil, &report.JobFileError{File: path, Key: "transform_version", Msg: fmt.Sprintf("missing required key: model folder %s holds numbered versions (%s); set transform_version, or name one file: sql = \"%s.sql\"", ref, modelVersions(dir), strings.TrimSuffix(ref, "/"))}
	}
	var text []byte
	if file != "" {
		dir = filepath.Dir(file)
		text, err = jobfs.ReadConfined(dir, filepath.Base(file))
	} else {
		file = filepath.Join(dir, fmt.Sprintf("v%d.sql", jf.TransformVersion))
		text, err = jobfs.ReadConfined(dir, fmt.Sprintf("v%d.sql", jf.TransformVersion))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, bad("transform_version", "model folder %s has no v%d.sql (%s)", resolveJobPath(filepath.Dir(path), ref), jf.TransformVersion, modelVersions(dir))
		}
	}
	if jobfs.IsSQLTooLarge(err) {
		return nil, err
	}
	if err != nil {
		return nil, bad("transform.sql", "model %s: %v", resolveJobPath(filepath.Dir(path), ref), err)
	}
	model, err := modelText(string(text))
	if err != nil {
		return nil, &report.JobFileError{File: file, Msg: err.Error()}
	}
	wrap, err := p.Transform(1)
	if err != nil {
		return nil, bad("pipeline", "%v", err)
	}
	jf.modelSQL, jf.modelFile, jf.modelDir = model, file, dir
	return wrapModel(wrap, model), nil
}

// wrapModel puts a model's text into the wrapper steps.
func wrapModel(wrap []pipeline.Step, model string) []pipeline.Step {
	steps := make([]pipeline.Step, len(wrap))
	for i, s := range wrap {
		steps[i] = pipeline.Step{Name: s.Name, SQL: strings.ReplaceAll(s.SQL, pipeline.ModelPlaceholder, model)}
	}
	return steps
}

// ModelAt is a model job as it reads transform version v: the steps with
// the model file v<v>.sql of its folder. A rerun rebuilds a snapshot with
// the version it recorded.
func (j *Job) ModelAt(v int) (*Job, error) {
	if j.ContentVersioned() {
		return nil, fmt.Errorf("model %s is one file, versioned by its text's sha256, not numbered", j.ModelFile)
	}
	file := filepath.Join(j.ModelDir, fmt.Sprintf("v%d.sql", v))
	text, err := jobfs.ReadConfined(j.ModelDir, fmt.Sprintf("v%d.sql", v))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model folder %s has no v%d.sql (%s)", j.ModelDir, v, modelVersions(j.ModelDir))
	}
	if jobfs.IsSQLTooLarge(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("model folder %s: %w", j.ModelDir, err)
	}
	at, err := j.ModelWith(string(text))
	if err != nil {
		return nil, &report.JobFileError{File: file, Msg: err.Error()}
	}
	at.TransformVersion, at.ModelFile = v, file
	return at, nil
}

// ModelWith is a model job running the model text given instead of its
// file's: the text a database kept of a version that the file no longer
// holds (see ContentVersioned).
func (j *Job) ModelWith(text string) (*Job, error) {
	model, err := modelText(text)
	if err != nil {
		return nil, err
	}
	wrap, err := j.Pipeline.Transform(1)
	if err != nil {
		return nil, err
	}
	at := *j
	at.ModelSQL = model
	at.Steps = wrapModel(wrap, model)
	at.useMacros(j.macroDefs) // another text may call other macros
	return &at, nil
}

// ContentVersioned says the job is a model written as one file ([transform]
// sql = "models/x.sql"), with no transform_version: its version is its
// text's sha256 (the transform part's, whose version is 0), so editing the
// file in place is a new version. The database keeps the text of every
// version a snapshot was built with (catalog.RecordModelText).
func (j *Job) ContentVersioned() bool {
	return j.Pipeline != nil && j.Pipeline.Model && j.TransformVersion == 0
}

// dbtRef is dbt's {{ ref('x') }} (or "x"), which a model may write for
// {{upstream:x}}: SQL ported from dbt keeps its references. modelText
// writes it as {{upstream:x}}, so both spellings give one model text, one
// key and one lineage.
var dbtRef = regexp.MustCompile(`\{\{\s*ref\(\s*(?:'([A-Za-z_][A-Za-z0-9_]*)'|"([A-Za-z_][A-Za-z0-9_]*)")\s*\)\s*\}\}`)

// RefsAsUpstream writes each {{ ref('x') }} of a model's text as
// {{upstream:x}}, as the job reads it.
func RefsAsUpstream(text string) string {
	return dbtRef.ReplaceAllStringFunc(text, func(m string) string {
		sub := dbtRef.FindStringSubmatch(m)
		return "{{upstream:" + sub[1] + sub[2] + "}}"
	})
}

// ModelUpstreams are the upstream jobs a model's text reads through
// {{upstream:NAME}}, in order of first reading.
func ModelUpstreams(text string) []string {
	var out []string
	for _, m := range pipeline.Placeholder.FindAllStringSubmatch(text, -1) {
		if m[1] == "upstream" && len(m[2]) > 1 {
			if name := m[2][1:]; !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// modelText is a model file's SELECT without its trailing semicolon and
// blank space. Its only placeholders are {{upstream:NAME}}: it cannot name
// idem's objects or the job's own target.
func modelText(text string) (string, error) {
	t := strings.TrimSpace(text)
	for strings.HasSuffix(t, ";") {
		t = strings.TrimSpace(strings.TrimSuffix(t, ";"))
	}
	if t == "" {
		return "", fmt.Errorf("the model is empty: write one SELECT")
	}
	t = RefsAsUpstream(t)
	for _, m := range pipeline.Placeholder.FindAllStringSubmatch(t, -1) {
		if m[1] != "upstream" {
			return "", fmt.Errorf("placeholder %s: a model reads its upstream jobs with {{upstream:NAME}} and nothing else", m[0])
		}
	}
	// A line comment at the end would swallow what the wrapper puts after
	// the model: end it with a new line.
	return t + "\n", nil
}

// modelVersions lists the v<N>.sql files present in a model folder.
func modelVersions(dir string) string {
	entries, _ := os.ReadDir(dir)
	var vs []int
	for _, e := range entries {
		if m := modelFile.FindStringSubmatch(e.Name()); m != nil && !e.IsDir() {
			n, _ := strconv.Atoi(m[1])
			vs = append(vs, n)
		}
	}
	return pipeline.VersionList(vs)
}

// insideJobDir resolves a folder written in a job file from the job
// file's folder and checks that it lies inside it (symbolic links
// followed), as for pipeline folders.
func insideJobDir(jobPath, ref string) (string, error) {
	jobDir, err := filepath.Abs(filepath.Dir(jobPath))
	if err != nil {
		return "", err
	}
	c := ref
	if !filepath.IsAbs(c) {
		c = filepath.Join(jobDir, ref)
	}
	real, err := filepath.EvalSymlinks(c)
	if err == nil {
		var st fs.FileInfo
		if st, err = os.Stat(real); err == nil && !st.IsDir() {
			err = fmt.Errorf("not a folder")
		}
	}
	if err != nil {
		return "", fmt.Errorf("no model folder %s (%s is read from the job file's folder)", resolveJobPath(filepath.Dir(jobPath), ref), ref)
	}
	root, err := filepath.EvalSymlinks(jobDir)
	if err != nil {
		return "", err
	}
	if !jobfs.Within(root, real) {
		return "", fmt.Errorf("model folder %s lies outside the job file's folder %s", ref, filepath.Dir(jobPath))
	}
	return real, nil
}

// modelPath resolves [transform] sql: a model file (ref ends in .sql and
// names a regular file), returned as file, or a folder of numbered
// versions, returned as dir; either inside the job file's folder.
func modelPath(jobPath, ref string) (file, dir string, err error) {
	if !strings.HasSuffix(strings.ToLower(ref), ".sql") {
		dir, err = insideJobDir(jobPath, ref)
		return "", dir, err
	}
	parent, name := filepath.Split(ref)
	if parent == "" {
		parent = "."
	}
	d, err := insideJobDir(jobPath, parent)
	if err != nil {
		return "", "", fmt.Errorf("model file %s: %v", ref, err)
	}
	f := filepath.Join(d, name)
	st, err := os.Lstat(f)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", fmt.Errorf("no model file %s (%s is read from the job file's folder)", resolveJobPath(filepath.Dir(jobPath), ref), ref)
	case err != nil:
		return "", "", err
	case st.IsDir():
		return "", f, nil // a folder named x.sql holds numbered versions
	}
	return f, "", nil
}

// IsModel says whether the job runs a model (pipeline = "select").
func (j *Job) IsModel() bool { return j.Pipeline.Model }

// ReleaseName is the name idem records the job's released SQL under: the
// pipeline's, or for a model "select:<job>", since every model shares the
// select pipeline but has SQL of its own.
func (j *Job) ReleaseName() string {
	if j.Pipeline.Model {
		return j.Pipeline.Name + ":" + j.Name
	}
	return j.Pipeline.Name
}

// NextVersionHint says where a new transform version goes, for the
// message that refuses an edited released version.
func (j *Job) NextVersionHint() string {
	if j.Pipeline.Model {
		return fmt.Sprintf("%s/v%d.sql", strings.TrimSuffix(j.written.transform, "/"), j.TransformVersion+1)
	}
	return "transform/v<N+1>/"
}

// ModelSchemaPart is the schema part of a model's key: the names and
// types of its SELECT's result columns, in order (each "name TYPE").
func (j *Job) ModelSchemaPart(columns []string) jobkey.SchemaPart {
	return jobkey.SchemaPart{Version: j.SchemaVersion, SHA256: pipeline.DigestString(strings.Join(columns, "\n"))}
}

// modelKey binds a model's [target] key: the columns that name one row of
// its result, which the run checks are unique and never NULL.
func (j *Job) modelKey(data []byte, jf *jobFile) error {
	bad := jobfs.KeyErrors(j.File, data)
	switch {
	case len(jf.Input.Columns) > 0:
		return bad("input.columns", "a model's columns are its SELECT's: remove [input.columns]")
	case jf.Target.OrderBy != "":
		return bad("target.order_by", "a model is written in key order: remove order_by")
	case len(jf.Target.Key) == 0:
		return &report.JobFileError{File: j.File, Line: jobfs.KeyLine(data, "target"), Key: "target.key",
			Msg: "a model names the columns that identify one row of its result: add key = [\"...\"] to [target]"}
	}
	seen := map[string]bool{}
	for _, k := range jf.Target.Key {
		if !sqltext.Identifier.MatchString(k) {
			return bad("target.key", "key column %q is not a column name of letters, digits and underscores", k)
		}
		if seen[k] {
			return bad("target.key", "key column %q is named twice", k)
		}
		seen[k] = true
	}
	j.Key = jf.Target.Key
	// The job's own copy of the pipeline carries the key, so history,
	// export and diff read it like a built-in's.
	cp := *j.Pipeline
	cp.Key = j.Key
	j.Pipeline = &cp
	return nil
}
