package run

import (
	"context"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
)

// CreateMacros creates the macros job j uses (seal.Macro) on q, the run's
// transaction, as TEMP macros: they live in that transaction and
// connection, never in the database. Their text is sealed first, before
// anything binds them (a model's columns are described before the run's
// seal check, which checks them again with the rest of the job's SQL),
// and a macro named like one of DuckDB's functions is refused
// (ShadowedMacros): either is a *report.UsageError (exit 2), nothing created.
func CreateMacros(ctx context.Context, q catalog.Querier, j *job.Job) error {
	if len(j.Macros) == 0 {
		return nil
	}
	vs, err := ShadowedMacros(ctx, q, j)
	if err != nil {
		return err
	}
	var texts []string
	for _, m := range j.Macros {
		texts = append(texts, sqltext.QueryTexts(m.Create)...)
	}
	parser, err := SealParser(ctx, q, texts)
	if err != nil {
		return err
	}
	seal := j.Seal()
	for _, t := range j.SealedTexts() {
		if !t.Macro {
			continue
		}
		found, _, err := seal.Check(t, parser)
		if err != nil {
			return fmt.Errorf("%s: %w", t.File, err)
		}
		vs = append(vs, found...)
	}
	if len(vs) > 0 {
		return sealError(j, vs)
	}
	for _, m := range j.Macros {
		if err := OneStatement(m.Create); err != nil {
			return report.Usage("job %s: macro %s (%s): %v", j.Name, m.Name, m.File, err)
		}
		if _, err := q.ExecContext(ctx, m.Create); err != nil {
			return report.Usage("job %s: macro %s (%s): %v", j.Name, m.Name, m.File, catalog.TrimSQLError(err))
		}
	}
	return nil
}

// ShadowedMacros are the macros j uses that are named like one of DuckDB's
// functions, which they would replace in every query of the run: a call
// of that name must mean what it means everywhere else.
func ShadowedMacros(ctx context.Context, q catalog.Querier, j *job.Job) ([]seal.Violation, error) {
	if len(j.Macros) == 0 {
		return nil, nil
	}
	names := make([]string, len(j.Macros))
	for i, m := range j.Macros {
		names[i] = m.Name
	}
	builtin, err := catalog.StringMap(ctx, q, `SELECT DISTINCT lower(function_name), lower(function_name) FROM duckdb_functions()
		WHERE database_name = 'system' AND lower(function_name) IN (SELECT lower(unnest(?::VARCHAR[])))`, names)
	if err != nil {
		return nil, fmt.Errorf("look up macro names: %w", err)
	}
	var out []seal.Violation
	for _, m := range j.Macros {
		if builtin[strings.ToLower(m.Name)] != "" {
			out = append(out, seal.Violation{File: m.File, Line: 1, Construct: m.Name + "()",
				Message: fmt.Sprintf("macro %s has the name of a DuckDB function, which it would replace in every query of the run", m.Name),
				Fix:     "name the macro otherwise (a dbt macro of a function DuckDB has, such as date_trunc, is DuckDB's own: call it and drop the macro)"})
		}
	}
	return out, nil
}

// createMacros creates the job's macros in the run's transaction once.
func (p *Prepared) createMacros(ctx context.Context, q catalog.Querier, j *job.Job) error {
	if p.macros {
		return nil
	}
	p.macros = true
	return CreateMacros(ctx, q, j)
}

// DropMacros drops the TEMP macros CreateMacros made, before the run
// commits: the next run on the connection creates its own.
func DropMacros(ctx context.Context, q catalog.Querier, j *job.Job) error {
	for _, m := range j.Macros {
		kind := "MACRO"
		if isTableMacro(m) {
			kind = "MACRO TABLE"
		}
		if _, err := q.ExecContext(ctx, "DROP "+kind+" IF EXISTS temp."+sqltext.QuoteIdent(m.Name)); err != nil {
			return catalog.TrimSQLError(err)
		}
	}
	return nil
}

// isTableMacro says whether a macro's body is AS TABLE (outside strings
// and comments).
func isTableMacro(m seal.Macro) bool {
	masked := strings.ToUpper(sqltext.MaskSQL(m.Create))
	return strings.Contains(" "+strings.Join(strings.Fields(masked), " ")+" ", " AS TABLE ")
}
