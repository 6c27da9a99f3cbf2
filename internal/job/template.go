package job

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/sqltext"
)

// placeholder matches a placeholder of the template language:
// {{name}} or {{name:arg:...}} (see templateFuncs).
var placeholder = regexp.MustCompile(`\{\{\s*([a-z_]+)((?::[^:}\s]*)*)\s*\}\}`)

var aliasRef = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// Expand expands the placeholders of a step or schema file for this job.
// The job's files were expanded once when it was loaded, so an unknown
// placeholder was already reported there.
func (j *Job) Expand(text string) string {
	out, _ := expandTemplate(text, j.Table, j.shape(), j.Input.Upstream)
	return out
}

// shape is the job-declared shape of a generic pipeline, or nil.
func (j *Job) shape() *tableShape {
	if j.Pipeline.Model {
		// A model's columns are its SELECT's: only the key is known.
		return &tableShape{key: j.Key}
	}
	if !j.Pipeline.Generic {
		return nil
	}
	return &tableShape{columns: j.Columns, key: j.Key, order: j.OrderBy}
}

type tableShape struct {
	columns []pipeline.Column
	key     []string
	order   string
}

func (s *tableShape) isKey(name string) bool {
	for _, k := range s.key {
		if k == name {
			return true
		}
	}
	return false
}

func (s *tableShape) typeOf(name string) string {
	for _, c := range s.columns {
		if c.Name == name {
			return c.Type
		}
	}
	return ""
}

// nonKey lists the columns that are not key columns, in declared order.
func (s *tableShape) nonKey() []string {
	var out []string
	for _, c := range s.columns {
		if !s.isKey(c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}

// payload lists the columns that are neither key nor ordering column.
func (s *tableShape) payload() []string {
	var out []string
	for _, c := range s.nonKey() {
		if c != s.order {
			out = append(out, c)
		}
	}
	return out
}

func (s *tableShape) names() []string {
	out := make([]string, len(s.columns))
	for i, c := range s.columns {
		out[i] = c.Name
	}
	return out
}

// expandTemplate expands every placeholder in text (see templateFuncs).
// It reports the first unknown or malformed placeholder, or a job-shaped
// one used in a pipeline that is not generic (shape nil).
func expandTemplate(text, table string, shape *tableShape, upstream []string) (string, error) {
	funcs := templateFuncs()
	x := &expansion{table: table, shape: shape, upstream: upstream}
	var firstErr error
	out := placeholder.ReplaceAllStringFunc(text, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		var args []string
		if sub[2] != "" {
			args = strings.Split(sub[2][1:], ":")
		}
		s, err := x.expand(funcs, sub[1], args)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("placeholder %s: %w", m, err)
			}
			return m
		}
		return s
	})
	return out, firstErr
}

// expansion is what the placeholders of one job's files expand from.
type expansion struct {
	table    string
	shape    *tableShape // nil: the pipeline is neither generic nor a model
	upstream []string
}

// expand expands placeholder name with its arguments.
func (x *expansion) expand(funcs map[string]templateFunc, name string, args []string) (string, error) {
	f, ok := funcs[name]
	switch {
	case ok && !f.generic:
		return f.expand(x, args)
	case x.shape == nil:
		return "", errors.New("only generic pipelines (generic = true) take their columns from the job")
	case !ok:
		return "", fmt.Errorf("unknown placeholder %q", name)
	}
	return f.expand(x, args)
}

// quoteRef quotes an alias or alias.column reference part by part.
func quoteRef(ref string) string {
	parts := strings.Split(ref, ".")
	for i, p := range parts {
		parts[i] = sqltext.QuoteIdent(p)
	}
	return strings.Join(parts, ".")
}

// Companion matches a {{table:_suffix}} placeholder: a companion object
// of the target, named by its suffix.
var Companion = regexp.MustCompile(`\{\{\s*table:([A-Za-z0-9_]+)\s*\}\}`)
