package run

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
)

// ParseQuery parses one query with DuckDB's json_serialize_sql on q: the
// statement's node, or ok false when the text is not one statement DuckDB
// can serialize (a parse error is not an error here).
func ParseQuery(ctx context.Context, q catalog.Querier, query string) (node map[string]any, ok bool, err error) {
	var text string
	if err := q.QueryRowContext(ctx, "SELECT CAST(json_serialize_sql(?::VARCHAR) AS VARCHAR)", query).Scan(&text); err != nil {
		return nil, false, fmt.Errorf("parse SQL: %w", err)
	}
	return readParse(text)
}

// parseAll parses queries in one statement (a round trip costs about as
// much as a parse; a run's seal check asks for a dozen) and returns the
// ParseFunc that answers from those parses, and asks DuckDB for a query
// it was not given.
func parseAll(ctx context.Context, q catalog.Querier, queries []string) (sqltext.ParseFunc, error) {
	parsed := map[string]string{}
	if len(queries) > 0 {
		var err error
		if parsed, err = catalog.StringMap(ctx, q, "SELECT t, CAST(json_serialize_sql(t) AS VARCHAR) FROM (SELECT DISTINCT unnest(?::VARCHAR[]) AS t)", queries); err != nil {
			return nil, fmt.Errorf("parse SQL: %w", err)
		}
	}
	return func(query string) (map[string]any, bool, error) {
		if text, ok := parsed[query]; ok {
			return readParse(text)
		}
		return ParseQuery(ctx, q, query)
	}, nil
}

// readParse reads json_serialize_sql's answer for one query.
func readParse(text string) (node map[string]any, ok bool, err error) {
	var parsed struct {
		Error      bool `json:"error"`
		Statements []struct {
			Node map[string]any `json:"node"`
		} `json:"statements"`
	}
	if err := json.Unmarshal([]byte(text), &parsed); err != nil {
		return nil, false, fmt.Errorf("read parse: %w", err)
	}
	if parsed.Error || len(parsed.Statements) != 1 {
		return nil, false, nil
	}
	return parsed.Statements[0].Node, true, nil
}

// SealViolations checks every SQL text of the job (seal.Seal): what each
// statement writes, the volatile functions, relations and table functions
// it reads. A plain name that is none of the job's is looked up in the
// database: a table or view of its main schema is another job's, so
// reading it is a violation; a name the database does not hold is left to
// the step to fail on (and to the binder check before each statement).
func SealViolations(ctx context.Context, q catalog.Querier, j *job.Job) ([]seal.Violation, error) {
	return sealViolations(ctx, q, j, nil)
}

// sealChecked is what seal.Seal.Check says of a job's texts: the violations
// and the names left to the database.
type sealChecked struct {
	vs      []seal.Violation
	unknown []seal.NameAt
}

// sealKey is the guard cache's key of the seal check of texts.
func sealKey(s *seal.Seal, texts []seal.SealedText) ([32]byte, error) {
	desc, err := sealDesc(s, texts)
	return guardKey("seal", desc), err
}

// sealDesc is what the seal check of texts depends on, besides the engine.
func sealDesc(s *seal.Seal, texts []seal.SealedText) (string, error) {
	desc, err := json.Marshal(struct {
		Seal  *seal.Seal
		Texts []seal.SealedText
	}{s, texts})
	return string(desc), err
}

// sealViolations is SealViolations with the verdict of seal.Seal.Check kept
// in c, keyed by the seal and every text it checked (a function of them
// and the engine alone); the names it leaves to the database are looked
// up every time.
func sealViolations(ctx context.Context, q catalog.Querier, j *job.Job, c *guardCache) ([]seal.Violation, error) {
	s := j.Seal()
	texts := j.SealedTexts()
	var k [32]byte
	if c != nil {
		var err error
		if k, err = sealKey(s, texts); err != nil {
			return nil, err
		}
	}
	checked, ok := c.get(k)
	if !ok {
		var queries []string
		for _, t := range texts {
			queries = append(queries, sqltext.QueryTexts(t.SQL)...)
		}
		parser, err := SealParser(ctx, q, queries)
		if err != nil {
			return nil, err
		}
		var sc sealChecked
		for _, t := range texts {
			vs, unknown, err := s.Check(t, parser)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.File, err)
			}
			sc.vs = append(sc.vs, vs...)
			sc.unknown = append(sc.unknown, unknown...)
		}
		checked = sc
		c.put(k, sc)
		if len(sc.vs) == 0 {
			// A pass is kept across processes too (verdicts.go).
			unknown, err := json.Marshal(sc.unknown)
			if err != nil {
				return nil, err
			}
			c.learnt(k, "seal", string(unknown))
		}
	}
	sc := checked.(sealChecked)
	out := slices.Clone(sc.vs)
	for _, n := range sc.unknown {
		var found int
		if err := q.QueryRowContext(ctx, `SELECT count(*) FROM (
			SELECT table_name AS name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'
			UNION ALL
			SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal
		) WHERE lower(name) = lower(?)`, n.Name).Scan(&found); err != nil {
			return nil, fmt.Errorf("look up table %s: %w", n.Name, err)
		}
		if found > 0 {
			out = append(out, seal.Violation{File: n.File, Line: n.Line, Construct: n.Written,
				Message: fmt.Sprintf("reads table %s of the database, which is not a declared upstream", n.Written),
				Fix:     fmt.Sprintf("declare it in [input] upstream and read it as {{upstream:%s}}", n.Name)})
		}
	}
	return out, nil
}

// checkSealed refuses (a *report.UsageError, exit 2) a job whose SQL reads or
// writes outside its declared relations, or calls a volatile function
// (SealViolations), naming every construct refused.
func checkSealed(ctx context.Context, q catalog.Querier, j *job.Job, c *guardCache) error {
	vs, err := sealViolations(ctx, q, j, c)
	if err != nil || len(vs) == 0 {
		return err
	}
	return sealError(j, vs)
}

func sealError(j *job.Job, vs []seal.Violation) error {
	lines := make([]string, 0, len(vs))
	for _, v := range vs {
		lines = append(lines, v.Error())
	}
	return report.Usage("job %s: its SQL reaches outside its declared inputs and tables, or gives other bytes on every run; refused:\n  %s",
		j.Name, strings.Join(lines, "\n  "))
}
