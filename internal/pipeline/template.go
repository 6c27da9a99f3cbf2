package pipeline

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/idem-dev/idem/internal/sqltext"
)

// Placeholder matches a placeholder of the template language:
// {{name}} or {{name:arg:...}} (see templateFuncs).
var Placeholder = regexp.MustCompile(`\{\{\s*([a-z_]+)((?::[^:}\s]*)*)\s*\}\}`)

var aliasRef = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// Shape is what a generic pipeline's placeholders expand against: a job's
// declared columns, key and ordering column (a model's, its key alone).
type Shape struct {
	Columns []Column
	Key     []string
	Order   string
}

func (s *Shape) isKey(name string) bool {
	for _, k := range s.Key {
		if k == name {
			return true
		}
	}
	return false
}

// TypeOf is the declared type of column name, or "".
func (s *Shape) TypeOf(name string) string {
	for _, c := range s.Columns {
		if c.Name == name {
			return c.Type
		}
	}
	return ""
}

// nonKey lists the columns that are not key columns, in declared order.
func (s *Shape) nonKey() []string {
	var out []string
	for _, c := range s.Columns {
		if !s.isKey(c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}

// Payload lists the columns that are neither key nor ordering column.
func (s *Shape) Payload() []string {
	var out []string
	for _, c := range s.nonKey() {
		if c != s.Order {
			out = append(out, c)
		}
	}
	return out
}

func (s *Shape) names() []string {
	out := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = c.Name
	}
	return out
}

// ExpandTemplate expands every placeholder in text (see templateFuncs).
// It reports the first unknown or malformed placeholder, or a job-shaped
// one used in a pipeline that is not generic (shape nil).
func ExpandTemplate(text, table string, shape *Shape, upstream []string) (string, error) {
	funcs := templateFuncs()
	x := &expansion{table: table, shape: shape, upstream: upstream}
	var firstErr error
	out := Placeholder.ReplaceAllStringFunc(text, func(m string) string {
		sub := Placeholder.FindStringSubmatch(m)
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
	shape    *Shape // nil: the pipeline is neither generic nor a model
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

// ModelPlaceholder is where a model pipeline's steps take the model.
const ModelPlaceholder = "{{model}}"
