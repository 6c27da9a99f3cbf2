package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Modes of a pipeline.
const (
	ModeRefresh = "refresh"
	ModeApply   = "apply"
)

// stepName is the whole versioning contract of a step file name.
var stepName = regexp.MustCompile(`^([0-9]{2})_([a-z][a-z0-9_]*)\.sql$`)

var versionDir = regexp.MustCompile(`^v([1-9][0-9]*)$`)

var schemaFile = regexp.MustCompile(`^v([1-9][0-9]*)\.sql$`)

// Column is one declared input column.
type Column struct {
	Name string `toml:"name"`
	Type string `toml:"type"`
}

// Param is one declared pipeline parameter.
type Param struct {
	Type    string `toml:"type"` // integer, float, string, boolean, string_list, integer_list
	Default any    `toml:"default"`
	Doc     string `toml:"doc"`
}

// Step is one SQL file of a transform version.
type Step struct {
	Name string // file name, e.g. 01_stage.sql
	SQL  string
}

// Pipeline is a loaded pipeline definition: its declaration and the file
// system its versions are read from.
type Pipeline struct {
	Name        string           `toml:"name"`
	Mode        string           `toml:"mode"`
	Description string           `toml:"description"`
	Key         []string         `toml:"key"`
	Position    string           `toml:"position"` // the source-order column, for erasure points
	Columns     []Column         `toml:"columns"`
	Params      map[string]Param `toml:"params"`
	// Generic pipelines (merge_by_key) take their columns, key and ordering
	// column from the job ([input.columns], [target] key and order_by) and
	// expand them into the SQL with placeholders (template.go).
	Generic bool `toml:"generic"`
	// OutcomesTable is the suffix of the table the commit step stores every
	// input row's outcome in ("_outcomes" for {{table:_outcomes}}), with an
	// outcome column and, in apply mode, a batch_id column. When it is set,
	// idem checks the balance on this run's stored rows (its batch's rows, or
	// the whole table in refresh mode) instead of re-reading the steps'
	// outcomes relation: what is checked is what commits, and reading the
	// stored rows back costs a fraction of a second where recomputing a
	// view's joins costs seconds.
	OutcomesTable string `toml:"outcomes_table"`
	// ConflictColumn is the target column whose value 'conflict' marks a
	// conflict the pipeline keeps in the target (with NULL values, out of
	// <table>_active). A run reports how many such rows the target holds.
	ConflictColumn string `toml:"conflict_column"`
	// Model pipelines (select) run one SELECT the job names in [transform]
	// sql: the transform version picks the model file, the pipeline's own
	// transform/v1 steps wrap it with {{model}}, and the target's columns
	// are the SELECT's (model.go). They declare no columns and no schema.
	Model bool `toml:"model"`
	// Reads lists what a job of this pipeline may read together: a job
	// with both a file input and upstream inputs needs
	// reads = ["files", "upstream"].
	Reads []string `toml:"reads"`
	// Tombstone is the pipeline's delete marker: the input columns and
	// values that make a row a delete ({"operation": "delete"}). A Kafka
	// tombstone (a message with a null value) of a job reading this
	// pipeline becomes one input row: its message key's fields with these
	// added, judged by the pipeline's own checks. Empty: the pipeline has no
	// delete a tombstone could be, and a tombstone is invalid_tombstone.
	Tombstone map[string]any `toml:"tombstone"`

	fsys   fs.FS
	origin string // "builtin:NAME" or the folder on disk
}

// Origin says where the pipeline was loaded from.
func (p *Pipeline) Origin() string { return p.origin }

// ColumnNames returns the declared input column names in order.
func (p *Pipeline) ColumnNames() []string {
	names := make([]string, len(p.Columns))
	for i, c := range p.Columns {
		names[i] = c.Name
	}
	return names
}

// Load reads pipeline.toml; lenient accepts an apply pipeline
// without key columns, so that idem lint can report it as a finding.
func Load(fsys fs.FS, origin string, lenient bool) (*Pipeline, error) {
	file := path.Join(origin, "pipeline.toml")
	data, err := fs.ReadFile(fsys, "pipeline.toml")
	if err != nil {
		msg := "cannot read pipeline definition"
		if !errors.Is(err, fs.ErrNotExist) {
			msg += ": " + err.Error()
		}
		return nil, &report.JobFileError{File: file, Msg: msg, Err: err}
	}
	if err := jobfs.CheckTOMLBounds(file, data); err != nil {
		return nil, err
	}
	p := &Pipeline{fsys: fsys, origin: origin}
	md, err := toml.Decode(string(data), p)
	if err != nil {
		return nil, jobfs.TOMLError(file, data, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		return nil, &report.JobFileError{File: file, Line: jobfs.KeyLine(data, un[0]...), Key: un[0].String(), Msg: "unknown key"}
	}
	bad := jobfs.KeyErrors(file, data)
	if !sqltext.Identifier.MatchString(p.Name) {
		return nil, bad("name", "must be a name of letters, digits and underscores")
	}
	if p.Mode != ModeRefresh && p.Mode != ModeApply {
		return nil, bad("mode", "must be %q or %q, not %q", ModeRefresh, ModeApply, p.Mode)
	}
	if p.Generic && (len(p.Columns) > 0 || len(p.Key) > 0) {
		return nil, bad("generic", "a generic pipeline takes its columns and key from the job; remove columns and key")
	}
	if p.Model && (p.Generic || len(p.Columns) > 0 || len(p.Key) > 0 || p.Mode != ModeRefresh) {
		return nil, bad("model", "a model pipeline is a refresh pipeline that takes its key from the job and its columns from its SELECT")
	}
	for _, r := range p.Reads {
		if r != ReadsFiles && r != ReadsUpstream {
			return nil, bad("reads", "must list %q and %q (got %q)", ReadsFiles, ReadsUpstream, r)
		}
	}
	if len(p.Columns) == 0 && !p.Generic && !p.Model {
		return nil, bad("columns", "a pipeline declares at least one input column")
	}
	seen := map[string]bool{}
	for _, c := range p.Columns {
		if !sqltext.Identifier.MatchString(c.Name) || seen[c.Name] {
			return nil, bad("columns", "column name %q is not a unique identifier", c.Name)
		}
		seen[c.Name] = true
	}
	if err := p.checkTombstone(bad); err != nil {
		return nil, err
	}
	if p.OutcomesTable != "" && !SuffixRef.MatchString(p.OutcomesTable) {
		return nil, bad("outcomes_table", "must be a table-name suffix of letters, digits and underscores, like \"_outcomes\"")
	}
	for _, k := range p.Key {
		if !sqltext.Identifier.MatchString(k) {
			return nil, bad("key", "key column %q is not an identifier", k)
		}
	}
	if p.Mode == ModeApply && len(p.Key) == 0 && !p.Generic && !lenient {
		return nil, &report.JobFileError{File: file, Key: "key", Msg: "an apply pipeline declares its key columns (rows would double on replay)", Err: report.ErrNoKey}
	}
	for name, prm := range p.Params {
		if !paramTypes[prm.Type] {
			return nil, bad("params."+name+".type", "unknown parameter type %q (want one of %s)", prm.Type, strings.Join(report.SortedKeys(paramTypes), ", "))
		}
		if prm.Default != nil {
			if _, err := ConvertParam(prm.Type, prm.Default); err != nil {
				return nil, bad("params."+name+".default", "%v", err)
			}
		}
	}
	return p, nil
}

// checkTombstone checks [tombstone]: an apply pipeline's own input
// columns, each given a string, integer or boolean.
func (p *Pipeline) checkTombstone(bad jobfs.KeyErrorFunc) error {
	if len(p.Tombstone) == 0 {
		return nil
	}
	if p.Mode != ModeApply || p.Generic || p.Model {
		return bad("tombstone", "a delete marker belongs to an apply pipeline that declares its columns (a tombstone is a delete of a change batch)")
	}
	for _, name := range report.SortedKeys(p.Tombstone) {
		if !slices.Contains(p.ColumnNames(), name) {
			return bad("tombstone."+name, "%q is not one of the pipeline's columns (%s)", name, strings.Join(p.ColumnNames(), ", "))
		}
		switch p.Tombstone[name].(type) {
		case string, int64, bool:
		default:
			return bad("tombstone."+name, "want a string, an integer or a boolean, found %s", describe(p.Tombstone[name]))
		}
	}
	return nil
}

// Transform returns the step files of transform version v in file-name order.
func (p *Pipeline) Transform(v int) ([]Step, error) {
	dir := fmt.Sprintf("transform/v%d", v)
	entries, err := fs.ReadDir(p.fsys, dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("pipeline %s has no transform version %d (%s): %w", p.Name, v, p.TransformVersions(), fs.ErrNotExist)
		}
		return nil, fmt.Errorf("read transform v%d of %s: %w", v, p.Name, err)
	}
	var steps []Step
	byNumber := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		m := stepName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("pipeline %s: step file %s/%s: name must look like NN_step.sql", p.Name, dir, e.Name())
		}
		if other, ok := byNumber[m[1]]; ok {
			return nil, fmt.Errorf("pipeline %s: step files %s and %s share number %s", p.Name, other, e.Name(), m[1])
		}
		byNumber[m[1]] = e.Name()
		data, err := jobfs.ReadSQLFile(p.fsys, path.Join(dir, e.Name()), path.Join(p.origin, dir, e.Name()))
		if jobfs.IsSQLTooLarge(err) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("read %s/%s: %w", dir, e.Name(), err)
		}
		steps = append(steps, Step{Name: e.Name(), SQL: string(data)})
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("pipeline %s: transform v%d has no step files", p.Name, v)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].Name < steps[j].Name })
	return steps, nil
}

// Schema returns the DDL of schema version v.
func (p *Pipeline) Schema(v int) (string, error) {
	name := fmt.Sprintf("schema/v%d.sql", v)
	data, err := jobfs.ReadSQLFile(p.fsys, name, path.Join(p.origin, name))
	if jobfs.IsSQLTooLarge(err) {
		return "", err
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("pipeline %s has no schema version %d (%s): %w", p.Name, v, p.SchemaVersions(), fs.ErrNotExist)
		}
		return "", fmt.Errorf("read schema v%d of %s: %w", v, p.Name, err)
	}
	return string(data), nil
}

// TransformVersions lists the transform versions present, for messages.
func (p *Pipeline) TransformVersions() string {
	entries, _ := fs.ReadDir(p.fsys, "transform")
	var vs []int
	for _, e := range entries {
		if m := versionDir.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			n, _ := strconv.Atoi(m[1])
			vs = append(vs, n)
		}
	}
	return VersionList(vs)
}

// SchemaVersions lists the schema versions present, for messages.
func (p *Pipeline) SchemaVersions() string {
	entries, _ := fs.ReadDir(p.fsys, "schema")
	var vs []int
	for _, e := range entries {
		if m := schemaFile.FindStringSubmatch(e.Name()); m != nil {
			n, _ := strconv.Atoi(m[1])
			vs = append(vs, n)
		}
	}
	return VersionList(vs)
}

func VersionList(vs []int) string {
	if len(vs) == 0 {
		return "none present"
	}
	slices.Sort(vs)
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = "v" + strconv.Itoa(v)
	}
	return "present: " + strings.Join(s, ", ")
}

// StepsDigest is the sha256 of a transform version's files: over each file's
// name and the sha256 of its bytes, in file-name order.
func StepsDigest(steps []Step) string {
	var b bytes.Buffer
	for _, s := range steps {
		sum := sha256.Sum256([]byte(s.SQL))
		fmt.Fprintf(&b, "%s %x\n", s.Name, sum)
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

func DigestString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var paramTypes = map[string]bool{
	"integer": true, "float": true, "string": true, "boolean": true,
	"string_list": true, "integer_list": true,
}

// ConvertParam checks a TOML value against a declared type and returns it in
// its canonical Go form (int64, float64, string, bool, []string, []int64).
func ConvertParam(typ string, v any) (any, error) {
	switch typ {
	case "integer":
		if n, ok := v.(int64); ok {
			return n, nil
		}
	case "float":
		switch n := v.(type) {
		case float64:
			return n, nil
		case int64:
			return float64(n), nil
		}
	case "string":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "string_list":
		if list, ok := v.([]any); ok {
			out := make([]string, 0, len(list))
			for _, x := range list {
				s, ok := x.(string)
				if !ok {
					return nil, fmt.Errorf("want a list of strings, found an element %s", describe(x))
				}
				out = append(out, s)
			}
			return out, nil
		}
	case "integer_list":
		if list, ok := v.([]any); ok {
			out := make([]int64, 0, len(list))
			for _, x := range list {
				n, ok := x.(int64)
				if !ok {
					return nil, fmt.Errorf("want a list of integers, found an element %s", describe(x))
				}
				out = append(out, n)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("want %s, found %s", strings.ReplaceAll(typ, "_", " of "), describe(v))
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("a string %q", x)
	case int64:
		return fmt.Sprintf("an integer %d", x)
	case float64:
		return fmt.Sprintf("a float %v", x)
	case bool:
		return fmt.Sprintf("a boolean %v", x)
	case []any:
		return "a list"
	case map[string]any:
		return "a table"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// What a pipeline may read together (pipeline.toml reads).
const (
	ReadsFiles    = "files"
	ReadsUpstream = "upstream"
)

var SuffixRef = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
