package job

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// Identifier is what idem accepts as a job, table or column name. Names are
// also quoted wherever they reach SQL; the pattern keeps them readable.
var Identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Input formats.
const (
	FormatCSV     = "csv"
	FormatJSONL   = "jsonl"
	FormatParquet = "parquet"
)

// DuckDBSettings are per-database settings applied when the database is
// opened. They never shape rows and are not part of the job key.
type DuckDBSettings struct {
	MemoryLimit   string `toml:"memory_limit" json:"memory_limit,omitempty"`
	Threads       int    `toml:"threads" json:"threads,omitempty"`
	TempDirectory string `toml:"temp_directory" json:"temp_directory,omitempty"`
	// ReadReplica publishes <database>.read.duckdb after every commit, a
	// copy that readers open while a writer holds the database. It is not
	// part of the job key.
	ReadReplica bool `toml:"read_replica" json:"read_replica,omitempty"`
}

// Job is a loaded and validated job file bound to its pipeline. Its
// relative paths (database, input, temp_directory, a pipeline folder) are
// resolved from the job file's folder: Database, Input.Path and
// DuckDB.TempDirectory hold them joined to the folder the job file was given
// in, so they name the same files from any working directory.
type Job struct {
	File             string // the job file's path as given
	Name             string
	TransformVersion int
	SchemaVersion    int
	Database         string // resolved from the job file's folder
	Input            InputSpec
	Table            string
	Params           map[string]any // resolved: declared defaults plus the job's values
	DuckDB           DuckDBSettings
	// Fencing is FencingRequired when every writing command must carry the
	// job's current --epoch ([job] fencing); it is not part of the key.
	Fencing string
	// Retention is [retention]; it is not part of the key.
	Retention Retention

	Pipeline *Pipeline
	Steps    []Step
	DDL      string
	// ModelSQL is a model's SELECT (pipeline = "select"), as its steps
	// embed it, and ModelFile the file it was read from.
	ModelSQL, ModelFile string
	ModelDir            string // the model folder, resolved

	// Job-declared shape of a generic pipeline (pipeline.toml generic =
	// true): the input columns in file order, the key and the ordering
	// column. Empty for pipelines that declare their own columns.
	Columns []Column
	Key     []string
	OrderBy string
	// PartitionBy is [target] partition_by: a column of a refresh job's
	// target whose declared values a run replaces (run --partitions),
	// leaving the other partitions as they are. Empty: the run replaces
	// the whole target.
	PartitionBy string
	// Rules are the [[quality.rules]], in file order.
	Rules []Rule

	// written are the paths as the job file spells them, for messages
	// about the rule before job-file-relative paths (see oldRuleHint).
	written struct{ database, input, transform string }
}

// InputSpec is the job's [input] table.
type InputSpec struct {
	Path   string // resolved from the job file's folder
	Format string // csv, jsonl or parquet; inferred from the extension when empty
	// Mode "files" takes each matched file not yet committed (see RunFiles);
	// Batch is then "per_file" (default) or "all".
	Mode  string
	Batch string
	// ChunkRows > 0 reads the input in chunks ordered by Watermark (see
	// RunChunks).
	ChunkRows int64
	Watermark string
	// Upstream names the jobs of the same database whose targets the steps
	// read with {{upstream:NAME}}, as the job file lists them.
	Upstream []string
	// ExtraColumns is ExtraIgnore when columns (or JSON fields) the pipeline
	// does not read are skipped; by default ("" or ExtraError) they refuse
	// the input.
	ExtraColumns string
	// Stream is set for a stream input (kind = "kafka" or "sse", stream.go).
	Stream StreamSpec
}

// Settings of [input] extra_columns.
const (
	ExtraError  = "error"
	ExtraIgnore = "ignore"
)

type jobFile struct {
	Name             string         `toml:"name"`
	Pipeline         string         `toml:"pipeline"`
	TransformVersion int            `toml:"transform_version"`
	SchemaVersion    int            `toml:"schema_version"`
	Database         string         `toml:"database"`
	Input            inputTable     `toml:"input"`
	Target           targetTable    `toml:"target"`
	Params           map[string]any `toml:"params"`
	DuckDB           DuckDBSettings `toml:"duckdb"`
	Quality          qualityTable   `toml:"quality"`
	Job              jobTable       `toml:"job"`
	Transform        transformTable `toml:"transform"`
	Retention        Retention      `toml:"retention"`

	modelSQL, modelFile, modelDir string // read by modelSteps
}

// Retention is the job file's [retention] table: how many snapshots stay
// readable and how often a verified checkpoint of the job's state is kept.
// It says how long the past is kept, never what a snapshot holds, so it is
// not part of the job key. Zero values: keep every snapshot, no
// checkpoints.
type Retention struct {
	// KeepSnapshots > 0 keeps the newest KeepSnapshots snapshots readable;
	// older ones expire (idem expire, and after each committed run).
	KeepSnapshots int64 `toml:"keep_snapshots"`
	// CheckpointEvery > 0 keeps an image of the job's state at every
	// CheckpointEvery-th snapshot, from which rerun replays.
	CheckpointEvery int64 `toml:"checkpoint_every"`
}

// jobTable is the job file's [job] table: how the job is operated, never
// what its rows are.
type jobTable struct {
	Fencing string `toml:"fencing"`
}

// Fencing settings of [job] fencing.
const (
	FencingOptional = "optional"
	FencingRequired = "required"
)

type inputTable struct {
	Path      string            `toml:"path"`
	Format    string            `toml:"format"`
	Mode      string            `toml:"mode"`
	Batch     string            `toml:"batch"`
	ChunkRows int64             `toml:"chunk_rows"`
	Watermark string            `toml:"watermark"`
	Columns   map[string]string `toml:"columns"`
	Extra     string            `toml:"extra_columns"`
	Upstream  []string          `toml:"upstream"`
	streamTable
}

type targetTable struct {
	Table       string   `toml:"table"`
	Key         []string `toml:"key"`
	OrderBy     string   `toml:"order_by"`
	PartitionBy string   `toml:"partition_by"`
}

// LoadJob reads and validates the job file at path, all but proving its
// quality rules on DuckDB (runner.LoadJob does that too). Built-in pipelines are
// read from builtins; a pipeline given as a path is read from disk and must
// lie inside the current directory or the job file's directory. Every error
// is a *JobFileError naming the file, the line and the key.
func LoadJob(path string, builtins fs.FS) (*Job, error) {
	data, err := ReadJobFile(path)
	if err != nil {
		return nil, err
	}
	return ParseJob(path, data, builtins)
}

// ReadJobFile reads a job file; an error is a *JobFileError that says why.
func ReadJobFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		reason := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			reason = pe.Err
		}
		return nil, &JobFileError{File: path, Msg: "cannot read job file: " + reason.Error(), Err: err}
	}
	return data, nil
}

// ParseJob validates job file bytes; path names the file in errors. It
// checks quality rules' names and text but does not prove them on DuckDB:
// runner.ParseJob does.
func ParseJob(path string, data []byte, builtins fs.FS) (*Job, error) {
	return parseJob(path, data, builtins, false)
}

// ParseJobLenient is ParseJob that accepts an apply pipeline without key
// columns, for idem lint to report.
func ParseJobLenient(path string, data []byte, builtins fs.FS) (*Job, error) {
	return parseJob(path, data, builtins, true)
}

// parseJob is ParseJob; lenient accepts an apply pipeline without key
// columns, for idem lint to report.
func parseJob(path string, data []byte, builtins fs.FS, lenient bool) (*Job, error) {
	var jf jobFile
	md, err := toml.Decode(string(data), &jf)
	if err != nil {
		return nil, tomlError(path, data, err)
	}
	bad := func(key, format string, args ...any) error {
		return &JobFileError{File: path, Line: keyLine(data, strings.Split(key, ".")), Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	for _, k := range md.Undecoded() {
		if len(k) >= 2 && k[0] == "params" {
			continue // checked against the pipeline below
		}
		return nil, &JobFileError{File: path, Line: keyLine(data, k), Key: k.String(), Msg: "unknown key"}
	}
	// schema_version is checked below, once the pipeline says whether it is
	// a model (whose schema is its result's columns).
	for _, req := range []string{"name", "pipeline", "transform_version"} {
		if !md.IsDefined(req) {
			return nil, &JobFileError{File: path, Key: req, Msg: "missing required key"}
		}
	}
	if !Identifier.MatchString(jf.Name) {
		return nil, bad("name", "must be letters, digits and underscores, starting with a letter (got %q)", jf.Name)
	}
	if jf.TransformVersion < 1 {
		return nil, bad("transform_version", "must be a positive integer")
	}
	if md.IsDefined("schema_version") && jf.SchemaVersion < 1 {
		return nil, bad("schema_version", "must be a positive integer")
	}
	table := jf.Target.Table
	if table == "" {
		table = jf.Name
	}
	if !Identifier.MatchString(table) {
		return nil, bad("target.table", "must be a table name of letters, digits and underscores, starting with a letter (got %q)", table)
	}
	if strings.HasPrefix(strings.ToLower(table), "idem") {
		return nil, bad("target.table", "names starting with idem are reserved")
	}
	format := strings.ToLower(jf.Input.Format)
	if format != "" && format != FormatCSV && format != FormatJSONL && format != FormatParquet {
		return nil, bad("input.format", "must be csv, jsonl or parquet (got %q)", jf.Input.Format)
	}
	switch jf.Input.Extra {
	case "", ExtraError, ExtraIgnore:
	default:
		return nil, bad("input.extra_columns", "must be %q or %q (got %q)", ExtraError, ExtraIgnore, jf.Input.Extra)
	}
	switch jf.Job.Fencing {
	case "", FencingOptional, FencingRequired:
	default:
		return nil, bad("job.fencing", "must be %q or %q (got %q)", FencingOptional, FencingRequired, jf.Job.Fencing)
	}
	if md.IsDefined("retention", "keep_snapshots") && jf.Retention.KeepSnapshots < 1 {
		return nil, bad("retention.keep_snapshots", "must be a positive integer (got %d)", jf.Retention.KeepSnapshots)
	}
	if md.IsDefined("retention", "checkpoint_every") && jf.Retention.CheckpointEvery < 1 {
		return nil, bad("retention.checkpoint_every", "must be a positive integer (got %d)", jf.Retention.CheckpointEvery)
	}
	if jf.DuckDB.Threads < 0 || jf.DuckDB.Threads > MaxThreads {
		return nil, bad("duckdb.threads", "must be a positive integer of at most %d (got %d)", MaxThreads, jf.DuckDB.Threads)
	}

	p, err := resolvePipeline(path, jf.Pipeline, builtins, lenient)
	if err != nil {
		var jfe *JobFileError
		if errors.As(err, &jfe) {
			return nil, err
		}
		return nil, bad("pipeline", "%v", err)
	}
	if !md.IsDefined("schema_version") && !p.Model {
		return nil, &JobFileError{File: path, Key: "schema_version", Msg: "missing required key"}
	}
	if md.IsDefined("transform") && !p.Model {
		return nil, bad("transform", "[transform] sql names a model folder; pipeline %s is not a model pipeline (pipeline = \"select\")", p.Name)
	}
	var steps []Step
	var ddl string
	if p.Model {
		// A model's transform version picks the model file; the pipeline's
		// own steps (version 1) wrap it (model.go).
		if steps, err = modelSteps(path, data, p, &jf); err != nil {
			return nil, err
		}
	} else {
		if steps, err = p.Transform(jf.TransformVersion); err != nil {
			return nil, bad("transform_version", "%v", err)
		}
		if ddl, err = p.Schema(jf.SchemaVersion); err != nil {
			return nil, bad("schema_version", "%v", err)
		}
	}

	params := map[string]any{}
	for _, name := range SortedKeys(jf.Params) {
		decl, ok := p.Params[name]
		if !ok {
			declared := strings.Join(SortedKeys(p.Params), ", ")
			if declared == "" {
				declared = "none"
			}
			return nil, bad("params."+name, "pipeline %s does not declare this parameter (declared: %s)", p.Name, declared)
		}
		v, err := ConvertParam(decl.Type, jf.Params[name])
		if err != nil {
			return nil, bad("params."+name, "%v", err)
		}
		params[name] = v
	}
	for name, decl := range p.Params {
		if _, ok := params[name]; ok {
			continue
		}
		if decl.Default == nil {
			return nil, &JobFileError{File: path, Key: "params." + name, Msg: fmt.Sprintf("pipeline %s requires this parameter (%s)", p.Name, decl.Type)}
		}
		v, _ := ConvertParam(decl.Type, decl.Default)
		params[name] = v
	}

	dir := filepath.Dir(path)
	duck := jf.DuckDB
	duck.TempDirectory = resolveJobPath(dir, duck.TempDirectory)
	job := &Job{
		File:             path,
		Name:             jf.Name,
		TransformVersion: jf.TransformVersion,
		SchemaVersion:    jf.SchemaVersion,
		Database:         resolveJobPath(dir, jf.Database),
		Input:            InputSpec{Path: resolveJobPath(dir, jf.Input.Path), Format: format, ExtraColumns: jf.Input.Extra},
		Table:            table,
		Params:           params,
		DuckDB:           duck,
		Fencing:          jf.Job.Fencing,
		Retention:        jf.Retention,
		Pipeline:         p,
		Steps:            steps,
		DDL:              ddl,
		ModelSQL:         jf.modelSQL,
		ModelFile:        jf.modelFile,
		ModelDir:         jf.modelDir,
	}
	job.written.database, job.written.input, job.written.transform = jf.Database, jf.Input.Path, jf.Transform.SQL
	if c := jf.Target.PartitionBy; c != "" {
		switch {
		case !Identifier.MatchString(c):
			return nil, bad("target.partition_by", "must be a column name of letters, digits and underscores (got %q)", c)
		case p.Mode != ModeRefresh:
			return nil, bad("target.partition_by", "partitions are replaced by refresh pipelines; pipeline %s is an %s pipeline", p.Name, p.Mode)
		}
		job.PartitionBy = c
	}
	// Upstream inputs and a model's key (upstream.go, model.go), then
	// job-declared columns, input modes and quality rules (jobext.go).
	if err := job.applyUpstream(data, &jf); err != nil {
		return nil, err
	}
	if err := job.applyExtensions(data, md, &jf); err != nil {
		return nil, err
	}
	if err := job.applyStream(data, md, &jf); err != nil { // stream.go
		return nil, err
	}
	return job, nil
}

// resolvePipeline finds a built-in pipeline by name, or a folder on disk by
// path, read from the job file's folder. The folder must lie inside the job
// file's folder: a path that climbs out with .. (or an absolute path
// elsewhere) is refused, so a job file reads only SQL of its own project.
func resolvePipeline(jobPath, ref string, builtins fs.FS, lenient bool) (*Pipeline, error) {
	if ref == "" {
		return nil, errors.New("missing pipeline name or path")
	}
	if Identifier.MatchString(ref) && builtins != nil {
		if sub, err := fs.Sub(builtins, ref); err == nil {
			if _, err := fs.Stat(sub, "pipeline.toml"); err == nil {
				return loadPipeline(sub, "builtin:"+ref, lenient)
			}
		}
	}
	dir, err := allowedPipelineDir(jobPath, ref)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && Identifier.MatchString(ref) {
			return nil, fmt.Errorf("no built-in pipeline named %q (built-ins: %s) and %v", ref, strings.Join(BuiltinNames(builtins), ", "), err)
		}
		return nil, err
	}
	return loadPipeline(os.DirFS(dir), dir, lenient)
}

// allowedPipelineDir resolves a pipeline folder from the job file's folder
// and checks that it lies inside it (symbolic links followed). A folder
// that does not exist, or has no pipeline.toml, is an error wrapping
// fs.ErrNotExist that says where it was looked for.
func allowedPipelineDir(jobPath, ref string) (string, error) {
	jobDir, err := filepath.Abs(filepath.Dir(jobPath))
	if err != nil {
		return "", err
	}
	c := ref
	if !filepath.IsAbs(c) {
		c = filepath.Join(jobDir, ref)
	}
	shown := resolveJobPath(filepath.Dir(jobPath), ref)
	real, err := filepath.EvalSymlinks(c)
	if err == nil {
		_, err = os.Stat(filepath.Join(real, "pipeline.toml"))
	}
	if err != nil {
		return "", notExist(fmt.Sprintf("no folder %s with a pipeline.toml (%s is read from the job file's folder)%s",
			shown, ref, oldRuleHint(jobPath, ref, true)))
	}
	root, err := filepath.EvalSymlinks(jobDir)
	if err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("pipeline folder %s lies outside the job file's folder %s: a job file sits beside or above the pipelines it runs", ref, filepath.Dir(jobPath))
	}
	return real, nil
}

// notExist is an error that reads msg and is fs.ErrNotExist.
type notExist string

func (e notExist) Error() string { return string(e) }
func (e notExist) Unwrap() error { return fs.ErrNotExist }

// resolveJobPath reads a path written in a job file from the job file's
// folder dir. Empty and absolute paths are returned as they are.
func resolveJobPath(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// oldRuleHint says, for a path written in the job file at jobPath that
// names nothing from the job file's folder, whether the same path read from
// the working directory (how idem read job-file paths before they became
// relative to the job file's folder) names something: a file (a folder when
// folder is true) or a glob match. It returns "; ..." to append to an
// error, naming the path to write instead and the flag that overrides the
// key (flag may be empty), or "" when the old rule names nothing either.
func oldRuleHint(jobPath, written string, folder bool, flag ...string) string {
	if written == "" || filepath.IsAbs(written) {
		return ""
	}
	jobDir, err1 := filepath.Abs(filepath.Dir(jobPath))
	old, err2 := filepath.Abs(written)
	if err1 != nil || err2 != nil || filepath.Join(jobDir, written) == old {
		return ""
	}
	found := false
	if strings.ContainsAny(written, "*?[") {
		m, _ := filepath.Glob(written)
		found = len(m) > 0
	} else if st, err := os.Stat(written); err == nil {
		found = st.IsDir() == folder
	}
	if !found {
		return ""
	}
	want := old
	if rel, err := filepath.Rel(jobDir, old); err == nil {
		want = filepath.ToSlash(rel)
	}
	if folder && strings.HasPrefix(want, "..") {
		return fmt.Sprintf("; %s read from the working directory does exist: idem read job-file paths from there before they became relative to the job file's folder; a pipeline folder lies inside the job file's folder: move %s into a folder that holds %s and write the path from there",
			written, jobPath, written)
	}
	or := ""
	if len(flag) > 0 {
		or = " or pass " + flag[0] + " " + written
	}
	return fmt.Sprintf("; %s read from the working directory does exist: idem read job-file paths from there before they became relative to the job file's folder; write %q in %s%s",
		written, want, jobPath, or)
}

// CheckDatabase returns a *UsageError (exit 2) when the job's database does
// not exist but the path written in the job file, read from the working
// directory as idem did before, names a file: a job written for the old
// rule would otherwise start a new, empty database beside the job file.
func (j *Job) CheckDatabase() error {
	if j.Database == "" {
		return nil
	}
	if _, err := os.Stat(j.Database); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if h := oldRuleHint(j.File, j.written.database, false, "--db"); h != "" {
		return Usage("database %s (read from the job file's folder) does not exist%s", j.Database, h)
	}
	return nil
}

// InputHint is the hint for a job [input] path that matches nothing, when
// the old rule (paths read from the working directory) would have matched;
// "" otherwise.
func (j *Job) InputHint() string {
	return oldRuleHint(j.File, j.written.input, false, "--input")
}

// BuiltinNames lists the built-in pipelines.
func BuiltinNames(builtins fs.FS) []string {
	if builtins == nil {
		return nil
	}
	entries, _ := fs.ReadDir(builtins, ".")
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			if _, err := fs.Stat(builtins, e.Name()+"/pipeline.toml"); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	return names
}

// tomlError turns a decode error into a JobFileError with the line.
func tomlError(path string, data []byte, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		key := pe.LastKey
		msg := pe.Message
		if pe.Usage != "" {
			msg += " (" + strings.TrimSpace(pe.Usage) + ")"
		}
		if msg == "" {
			msg = pe.Error()
		}
		return &JobFileError{File: path, Line: pe.Position.Line, Key: key, Msg: msg, Err: err}
	}
	// Type mismatches ("toml: line 3 (last key "x"): incompatible types ...")
	msg := strings.TrimPrefix(err.Error(), "toml: ")
	line := 0
	if m := regexp.MustCompile(`^line (\d+)`).FindStringSubmatch(msg); m != nil {
		fmt.Sscanf(m[1], "%d", &line)
	}
	return &JobFileError{File: path, Line: line, Msg: msg, Err: err}
}

// keyLine finds the line that defines key in a TOML document: it follows
// table headers and matches "name =" inside the right table. 0 when unknown.
func keyLine(data []byte, key []string) int {
	if len(key) == 0 {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var table []string
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			h := strings.Trim(strings.SplitN(line, "#", 2)[0], " []")
			table = splitDotted(h)
			if EqualKeys(table, key) {
				return n
			}
			continue
		}
		eq := strings.Index(line, "=")
		if eq <= 0 {
			continue
		}
		full := append(append([]string{}, table...), splitDotted(strings.TrimSpace(line[:eq]))...)
		if EqualKeys(full, key) || (len(full) > len(key) && EqualKeys(full[:len(key)], key)) {
			return n
		}
	}
	if len(key) > 1 {
		if l := keyLine(data, key[:len(key)-1]); l > 0 {
			return l
		}
	}
	return 0
}

func splitDotted(s string) []string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return parts
}

func EqualKeys(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
