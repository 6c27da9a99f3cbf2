package job

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
)

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
	File string // the job file's path as given
	Name string
	// Description is the job file's top-level description: what the job's
	// rows are, for people (idem docs). It is not part of the key.
	Description      string
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
	// Privacy is [privacy]; it is not part of the key.
	Privacy Privacy
	// Publish is [publish] (publish.go); it is not part of the key.
	Publish Publish
	// Tags are the job file's tags = [...], which --select tag:NAME picks;
	// not part of the key.
	Tags []string

	Pipeline *pipeline.Pipeline
	Steps    []pipeline.Step
	DDL      string
	// ModelSQL is a model's SELECT (pipeline = "select"), as its steps
	// embed it, and ModelFile the file it was read from.
	ModelSQL, ModelFile string
	ModelDir            string // the model folder, resolved

	// Job-declared shape of a generic pipeline (pipeline.toml generic =
	// true): the input columns in file order, the key and the ordering
	// column. Empty for pipelines that declare their own columns.
	Columns []pipeline.Column
	Key     []string
	OrderBy string
	// PartitionBy is [target] partition_by: a column of a refresh job's
	// target whose declared values a run replaces (run --partitions),
	// leaving the other partitions as they are. Empty: the run replaces
	// the whole target.
	PartitionBy string
	// Incremental is a model's [target] incremental: IncrementalPartition
	// recomputes only the partitions whose upstream rows changed,
	// IncrementalKey only the keys (incremental.go). Empty: every run rebuilds the whole target. It is
	// not part of the key: both ways give the same rows.
	Incremental string
	// incrementalLine is the job file's line of [target] incremental, for
	// CheckIncremental's errors.
	incrementalLine int
	// Rules are the [[quality.rules]], in file order.
	Rules []Rule
	// Audits are the [[audit]] checks of the target, in file order.
	Audits []Audit
	// Macros are the macros of the job file's macros folder that its SQL
	// calls, each after those it calls (macro.go); macroDefs are all of
	// that folder's.
	Macros    []seal.Macro
	macroDefs map[string]seal.Macro

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
	// Conflicts is what a seed (Mode "replace", a reference table) does
	// with keys whose rows hold different values: ConflictsRefuse (the
	// default) refuses the run, ConflictsKeep stores them as conflict
	// rows. Empty for other inputs; not part of the key.
	Conflicts string
	// Iceberg is set for an Iceberg table input (iceberg.go).
	Iceberg *IcebergSpec
}

// Settings of [input] conflicts.
const (
	ConflictsRefuse = "refuse"
	ConflictsKeep   = "keep"
)

// Settings of [input] extra_columns.
const (
	ExtraError  = "error"
	ExtraIgnore = "ignore"
)

// tagName is the form of a tag in tags = [...].
var tagName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

type jobFile struct {
	Name             string         `toml:"name"`
	Description      string         `toml:"description"`
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
	Privacy          Privacy        `toml:"privacy"`
	Publish          Publish        `toml:"publish"`
	Audit            []Audit        `toml:"audit"`
	Tags             []string       `toml:"tags"`

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

// Privacy is the job file's [privacy] table: which columns of the job's
// rows identify a person (the data subject). idem erase --subject VALUE
// removes every row whose subject column holds VALUE, in this job and in
// every job of the database that reads it. It says who a row is about,
// never what the row holds, so it is not part of the job key.
type Privacy struct {
	// Subject are the columns of the target (and of the input, where the
	// pipeline's input carries them) that name the subject. A row belongs
	// to a subject when any of them holds the value.
	Subject []string `toml:"subject"`
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
	Conflicts string            `toml:"conflicts"`
	Iceberg   *icebergTable     `toml:"iceberg"`
	streamTable
}

type targetTable struct {
	Table       string   `toml:"table"`
	Key         []string `toml:"key"`
	OrderBy     string   `toml:"order_by"`
	PartitionBy string   `toml:"partition_by"`
	Incremental string   `toml:"incremental"`
}

// LoadJob reads and validates the job file at path, all but proving its
// quality rules on DuckDB (runner.LoadJob does that too). Built-in pipelines are
// read from builtins; a pipeline given as a path is read from disk and must
// lie inside the current directory or the job file's directory. Every error
// is a *JobFileError naming the file, the line and the key.
func LoadJob(path string, builtins fs.FS) (*Job, error) {
	data, err := jobfs.ReadJobFile(path)
	if err != nil {
		return nil, err
	}
	return ParseJob(path, data, builtins)
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
	if err := jobfs.CheckTOMLBounds(path, data); err != nil {
		return nil, err
	}
	jf, md, err := decodeJobFile(path, data)
	if err != nil {
		return nil, err
	}
	bad := jobfs.KeyErrors(path, data)
	table, format, err := checkJobKeys(&jf, md, bad)
	if err != nil {
		return nil, err
	}
	p, steps, ddl, err := bindPipeline(path, data, &jf, md, builtins, lenient)
	if err != nil {
		return nil, err
	}
	params, err := bindParams(path, p, jf.Params, bad)
	if err != nil {
		return nil, err
	}
	job := newJob(path, &jf, p, table, format, params)
	job.Steps, job.DDL = steps, ddl
	if err := job.checkTableName(bad, &jf); err != nil { // reserved.go
		return nil, err
	}
	// Partitions, upstream inputs and a model's key (upstream.go,
	// model.go), job-declared columns, input modes and quality rules
	// (jobext.go), and a stream input (stream.go).
	if err := checkPublish(&job.Publish, filepath.Dir(path), bad); err != nil { // publish.go
		return nil, err
	}
	if err := job.applyPartition(bad, &jf); err != nil {
		return nil, err
	}
	if err := job.applyUpstream(data, &jf); err != nil {
		return nil, err
	}
	if err := job.applyExtensions(data, md, &jf); err != nil {
		return nil, err
	}
	if err := job.applyIncremental(data, &jf); err != nil { // incremental.go
		return nil, err
	}
	if err := job.applyStream(data, md, &jf); err != nil {
		return nil, err
	}
	if err := job.applyIceberg(data, md, &jf); err != nil { // iceberg.go
		return nil, err
	}
	macros, err := loadMacros(path) // macro.go
	if err != nil {
		return nil, err
	}
	job.useMacros(macros)
	if err := job.checkDeclaredReads(data, &jf); err != nil { // upstream.go
		return nil, err
	}
	return job, nil
}

// decodeJobFile decodes a job file, refusing unknown keys (but for params,
// which the pipeline declares) and a missing name, pipeline or
// transform_version.
func decodeJobFile(path string, data []byte) (jobFile, toml.MetaData, error) {
	var jf jobFile
	md, err := toml.Decode(string(data), &jf)
	if err != nil {
		return jf, md, jobfs.TOMLError(path, data, err)
	}
	for _, k := range md.Undecoded() {
		if len(k) >= 2 && k[0] == "params" {
			continue // checked against the pipeline in bindParams
		}
		if k[0] == ColumnsTable {
			continue // column descriptions, checked below (columns_doc.go)
		}
		return jf, md, &report.JobFileError{File: path, Line: jobfs.KeyLine(data, k...), Key: k.String(), Msg: "unknown key"}
	}
	if _, err := ColumnDocs(path, data); err != nil {
		return jf, md, err
	}
	// schema_version and transform_version are checked in bindPipeline,
	// once the pipeline says whether it is a model (whose schema is its
	// result's columns, and whose one file is versioned by its text).
	for _, req := range []string{"name", "pipeline"} {
		if !md.IsDefined(req) {
			return jf, md, &report.JobFileError{File: path, Key: req, Msg: "missing required key"}
		}
	}
	return jf, md, nil
}

// checkJobKeys checks the keys of a job file that need no pipeline, and
// returns the target table (the job's name when [target] table is absent)
// and the input format, lower case.
func checkJobKeys(jf *jobFile, md toml.MetaData, bad jobfs.KeyErrorFunc) (table, format string, err error) {
	if !sqltext.Identifier.MatchString(jf.Name) {
		return "", "", bad("name", "must be letters, digits and underscores, starting with a letter (got %q)", jf.Name)
	}
	if md.IsDefined("transform_version") && jf.TransformVersion < 1 {
		return "", "", bad("transform_version", "must be a positive integer")
	}
	if md.IsDefined("schema_version") && jf.SchemaVersion < 1 {
		return "", "", bad("schema_version", "must be a positive integer")
	}
	table = jf.Target.Table
	if table == "" {
		table = jf.Name
	}
	if !sqltext.Identifier.MatchString(table) {
		return "", "", bad("target.table", "must be a table name of letters, digits and underscores, starting with a letter (got %q)", table)
	}
	if strings.HasPrefix(strings.ToLower(table), "idem") {
		return "", "", bad("target.table", "names starting with idem are reserved")
	}
	format = strings.ToLower(jf.Input.Format)
	if format != "" && format != FormatCSV && format != FormatJSONL && format != FormatParquet {
		return "", "", bad("input.format", "must be csv, jsonl or parquet (got %q)", jf.Input.Format)
	}
	switch jf.Input.Extra {
	case "", ExtraError, ExtraIgnore:
	default:
		return "", "", bad("input.extra_columns", "must be %q or %q (got %q)", ExtraError, ExtraIgnore, jf.Input.Extra)
	}
	return table, format, checkOperation(jf, md, bad)
}

// checkOperation checks the keys that say how the job is operated, never
// what its rows are: [job], [retention] and [duckdb] threads.
func checkOperation(jf *jobFile, md toml.MetaData, bad jobfs.KeyErrorFunc) error {
	switch jf.Job.Fencing {
	case "", FencingOptional, FencingRequired:
	default:
		return bad("job.fencing", "must be %q or %q (got %q)", FencingOptional, FencingRequired, jf.Job.Fencing)
	}
	if md.IsDefined("retention", "keep_snapshots") && jf.Retention.KeepSnapshots < 1 {
		return bad("retention.keep_snapshots", "must be a positive integer (got %d)", jf.Retention.KeepSnapshots)
	}
	if md.IsDefined("retention", "checkpoint_every") && jf.Retention.CheckpointEvery < 1 {
		return bad("retention.checkpoint_every", "must be a positive integer (got %d)", jf.Retention.CheckpointEvery)
	}
	if err := checkPrivacy(jf.Privacy, md, bad); err != nil {
		return err
	}
	for i, tag := range jf.Tags {
		if !tagName.MatchString(tag) {
			return bad("tags", "tag %q: want letters, digits, _, - and . (starting with a letter or digit)", tag)
		}
		if slices.Contains(jf.Tags[:i], tag) {
			return bad("tags", "tag %s is named twice", tag)
		}
	}
	if err := CheckMemoryLimit(jf.DuckDB.MemoryLimit); jf.DuckDB.MemoryLimit != "" && err != nil {
		return bad("duckdb.memory_limit", "%v", err)
	}
	if jf.DuckDB.Threads < 0 || jf.DuckDB.Threads > report.MaxThreads {
		return bad("duckdb.threads", "must be a positive integer of at most %d (got %d)", report.MaxThreads, jf.DuckDB.Threads)
	}
	return nil
}

// bindPipeline loads the job's pipeline and reads its transform version's
// steps and its schema version's DDL; a model's steps wrap the model file
// its [transform] sql folder holds for the transform version (model.go).
func bindPipeline(path string, data []byte, jf *jobFile, md toml.MetaData, builtins fs.FS, lenient bool) (p *pipeline.Pipeline, steps []pipeline.Step, ddl string, err error) {
	bad := jobfs.KeyErrors(path, data)
	p, err = resolvePipeline(path, jf.Pipeline, builtins, lenient)
	if err != nil {
		var jfe *report.JobFileError
		if errors.As(err, &jfe) {
			return nil, nil, "", err
		}
		return nil, nil, "", bad("pipeline", "%v", err)
	}
	if !md.IsDefined("schema_version") && !p.Model {
		return nil, nil, "", &report.JobFileError{File: path, Key: "schema_version", Msg: "missing required key"}
	}
	if !md.IsDefined("transform_version") && !p.Model {
		return nil, nil, "", &report.JobFileError{File: path, Key: "transform_version", Msg: "missing required key"}
	}
	if md.IsDefined("transform") && !p.Model {
		return nil, nil, "", bad("transform", "[transform] sql names a model folder; pipeline %s is not a model pipeline (pipeline = \"select\")", p.Name)
	}
	if p.Model {
		steps, err = modelSteps(path, data, p, jf, md)
		return p, steps, "", err
	}
	if steps, err = p.Transform(jf.TransformVersion); err != nil {
		return nil, nil, "", bad("transform_version", "%v", err)
	}
	if ddl, err = p.Schema(jf.SchemaVersion); err != nil {
		return nil, nil, "", bad("schema_version", "%v", err)
	}
	return p, steps, ddl, nil
}

// bindParams checks the job's [params] against the pipeline's declaration
// and returns every declared param: the job's value, converted to its
// declared type, or the declared default.
func bindParams(path string, p *pipeline.Pipeline, given map[string]any, bad jobfs.KeyErrorFunc) (map[string]any, error) {
	params := map[string]any{}
	for _, name := range report.SortedKeys(given) {
		decl, ok := p.Params[name]
		if !ok {
			declared := strings.Join(report.SortedKeys(p.Params), ", ")
			if declared == "" {
				declared = "none"
			}
			return nil, bad("params."+name, "pipeline %s does not declare this parameter (declared: %s)", p.Name, declared)
		}
		v, err := pipeline.ConvertParam(decl.Type, given[name])
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
			return nil, &report.JobFileError{File: path, Key: "params." + name, Msg: fmt.Sprintf("pipeline %s requires this parameter (%s)", p.Name, decl.Type)}
		}
		v, _ := pipeline.ConvertParam(decl.Type, decl.Default)
		params[name] = v
	}
	return params, nil
}

// newJob is the job of a checked job file, its paths resolved from the
// job file's folder.
func newJob(path string, jf *jobFile, p *pipeline.Pipeline, table, format string, params map[string]any) *Job {
	dir := filepath.Dir(path)
	duck := jf.DuckDB
	duck.TempDirectory = resolveJobPath(dir, duck.TempDirectory)
	j := &Job{
		File:             path,
		Name:             jf.Name,
		Description:      jf.Description,
		TransformVersion: jf.TransformVersion,
		SchemaVersion:    jf.SchemaVersion,
		Database:         resolveJobPath(dir, jf.Database),
		Input:            InputSpec{Path: resolveJobPath(dir, jf.Input.Path), Format: format, ExtraColumns: jf.Input.Extra},
		Table:            table,
		Params:           params,
		DuckDB:           duck,
		Fencing:          jf.Job.Fencing,
		Retention:        jf.Retention,
		Privacy:          jf.Privacy,
		Publish:          jf.Publish,
		Tags:             jf.Tags,
		Pipeline:         p,
		ModelSQL:         jf.modelSQL,
		ModelFile:        jf.modelFile,
		ModelDir:         jf.modelDir,
	}
	j.written.database, j.written.input, j.written.transform = jf.Database, jf.Input.Path, jf.Transform.SQL
	return j
}

// applyPartition binds [target] partition_by: a column of a refresh
// pipeline's target.
func (j *Job) applyPartition(bad jobfs.KeyErrorFunc, jf *jobFile) error {
	c := jf.Target.PartitionBy
	if c == "" {
		return nil
	}
	switch {
	case !sqltext.Identifier.MatchString(c):
		return bad("target.partition_by", "must be a column name of letters, digits and underscores (got %q)", c)
	case j.Pipeline.Mode != pipeline.ModeRefresh:
		return bad("target.partition_by", "partitions are replaced by refresh pipelines; pipeline %s is an %s pipeline", j.Pipeline.Name, j.Pipeline.Mode)
	}
	j.PartitionBy = c
	return nil
}

// checkPrivacy checks [privacy] subject: a non-empty list of distinct
// column names. That they are columns of the target is checked where the
// target is known (a run, an erasure).
func checkPrivacy(p Privacy, md toml.MetaData, bad jobfs.KeyErrorFunc) error {
	if !md.IsDefined("privacy", "subject") {
		return nil
	}
	if len(p.Subject) == 0 {
		return bad("privacy.subject", "must name at least one column of the target")
	}
	seen := map[string]bool{}
	for _, c := range p.Subject {
		if strings.TrimSpace(c) == "" {
			return bad("privacy.subject", "column names must not be empty")
		}
		if seen[strings.ToLower(c)] {
			return bad("privacy.subject", "names column %q twice", c)
		}
		seen[strings.ToLower(c)] = true
	}
	return nil
}
