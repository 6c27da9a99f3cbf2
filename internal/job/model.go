package job

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// transformTable is the job file's [transform] table: the folder of a
// model's SQL (pipeline = "select").
type transformTable struct {
	SQL string `toml:"sql"`
}

var modelFile = regexp.MustCompile(`^v([1-9][0-9]*)\.sql$`)

// ModelPlaceholder is where a model pipeline's steps take the model.
const ModelPlaceholder = "{{model}}"

// modelSteps reads the model a job of a model pipeline names: the file
// v<transform_version>.sql in its [transform] sql folder, one SELECT. The
// pipeline's transform/v1 steps wrap it: {{model}} in them is replaced by
// the model's text, so the transform part's sha256 covers the model.
func modelSteps(path string, data []byte, p *Pipeline, jf *jobFile) ([]Step, error) {
	bad := keyErrors(path, data)
	ref := jf.Transform.SQL
	if ref == "" {
		return nil, bad("transform.sql", "pipeline %s runs one SELECT from a model folder: add [transform] sql = \"models/%s\" holding v1.sql", p.Name, jf.Name)
	}
	dir, err := insideJobDir(path, ref)
	if err != nil {
		return nil, bad("transform.sql", "%v", err)
	}
	file := filepath.Join(dir, fmt.Sprintf("v%d.sql", jf.TransformVersion))
	text, err := readConfined(dir, fmt.Sprintf("v%d.sql", jf.TransformVersion))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, bad("transform_version", "model folder %s has no v%d.sql (%s)", resolveJobPath(filepath.Dir(path), ref), jf.TransformVersion, modelVersions(dir))
	}
	if err != nil {
		return nil, bad("transform.sql", "model folder %s: %v", resolveJobPath(filepath.Dir(path), ref), err)
	}
	model, err := modelText(string(text))
	if err != nil {
		return nil, &JobFileError{File: file, Msg: err.Error()}
	}
	wrap, err := p.Transform(1)
	if err != nil {
		return nil, bad("pipeline", "%v", err)
	}
	jf.modelSQL, jf.modelFile, jf.modelDir = model, file, dir
	return wrapModel(wrap, model), nil
}

// wrapModel puts a model's text into the wrapper steps.
func wrapModel(wrap []Step, model string) []Step {
	steps := make([]Step, len(wrap))
	for i, s := range wrap {
		steps[i] = Step{Name: s.Name, SQL: strings.ReplaceAll(s.SQL, ModelPlaceholder, model)}
	}
	return steps
}

// ModelAt is a model job as it reads transform version v: the steps with
// the model file v<v>.sql of its folder. A rerun rebuilds a snapshot with
// the version it recorded.
func (j *Job) ModelAt(v int) (*Job, error) {
	file := filepath.Join(j.ModelDir, fmt.Sprintf("v%d.sql", v))
	text, err := readConfined(j.ModelDir, fmt.Sprintf("v%d.sql", v))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model folder %s has no v%d.sql (%s)", j.ModelDir, v, modelVersions(j.ModelDir))
	}
	if err != nil {
		return nil, fmt.Errorf("model folder %s: %w", j.ModelDir, err)
	}
	model, err := modelText(string(text))
	if err != nil {
		return nil, &JobFileError{File: file, Msg: err.Error()}
	}
	wrap, err := j.Pipeline.Transform(1)
	if err != nil {
		return nil, err
	}
	at := *j
	at.TransformVersion, at.ModelSQL, at.ModelFile = v, model, file
	at.Steps = wrapModel(wrap, model)
	return &at, nil
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
	for _, m := range placeholder.FindAllStringSubmatch(t, -1) {
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
	return versionList(vs)
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
	if !within(root, real) {
		return "", fmt.Errorf("model folder %s lies outside the job file's folder %s", ref, filepath.Dir(jobPath))
	}
	return real, nil
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
func (j *Job) ModelSchemaPart(columns []string) SchemaPart {
	return SchemaPart{Version: j.SchemaVersion, SHA256: DigestString(strings.Join(columns, "\n"))}
}

// modelKey binds a model's [target] key: the columns that name one row of
// its result, which the run checks are unique and never NULL.
func (j *Job) modelKey(data []byte, jf *jobFile) error {
	bad := keyErrors(j.File, data)
	switch {
	case len(jf.Input.Columns) > 0:
		return bad("input.columns", "a model's columns are its SELECT's: remove [input.columns]")
	case jf.Target.OrderBy != "":
		return bad("target.order_by", "a model is written in key order: remove order_by")
	case len(jf.Target.Key) == 0:
		return &JobFileError{File: j.File, Line: keyLine(data, []string{"target"}), Key: "target.key",
			Msg: "a model names the columns that identify one row of its result: add key = [\"...\"] to [target]"}
	}
	seen := map[string]bool{}
	for _, k := range jf.Target.Key {
		if !Identifier.MatchString(k) {
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
