package run

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
)

// AuditResult is what one [[audit]] of a job found in the target as the
// run left it, before COMMIT.
type AuditResult struct {
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	Severity   string `json:"severity"`
	Violations int64  `json:"violations"`
	// Rows are up to auditRows of the violating rows, each as
	// "column=value, ..." (row_count: the count against its bounds).
	Rows []string `json:"rows"`
}

// auditRows is how many violating rows an audit result names.
const auditRows = 10

// AuditError is a run refused by an audit of severity error: exit 1,
// nothing committed.
type AuditError struct {
	Job     string
	Results []AuditResult
}

func (e *AuditError) Error() string {
	parts := make([]string, len(e.Results))
	for i, r := range e.Results {
		parts[i] = fmt.Sprintf("audit %s (%s) found %d violation(s): %s", r.Name, r.Kind, r.Violations, strings.Join(r.Rows, "; "))
	}
	return fmt.Sprintf("job %s: %s; nothing committed", e.Job, strings.Join(parts, "; "))
}

// LogMessage is e without the violating rows, for the run log.
func (e *AuditError) LogMessage() string {
	return fmt.Sprintf("job %s: %s; nothing committed", e.Job, auditNote(e.Results))
}

// audits runs the job's [[audit]] checks over its target inside the
// transaction: any violation of an error audit fails the run (an
// *AuditError, nothing committed); the results of every audit are the
// run's (Result.Audits), and a warn audit's violations go to the run log.
func (r *txRun) audits(ctx context.Context) (bool, error) {
	ok, err := r.runAudits(ctx)
	if err != nil || !ok {
		return ok, err
	}
	// The last phase that calls the job's macros: they go before COMMIT.
	return true, DropMacros(ctx, r.tx, r.j)
}

func (r *txRun) runAudits(ctx context.Context) (bool, error) {
	j, tx := r.j, r.tx
	if len(j.Audits) == 0 || r.opts.SkipAudits {
		return true, nil
	}
	done := r.opts.Progress.Start("audits")
	defer done()
	var sealed *sealedRun
	var failed []AuditResult
	for _, a := range j.Audits {
		if a.Kind == job.AuditSQL && sealed == nil {
			var err error
			if sealed, err = newSealedRun(ctx, tx, j); err != nil {
				return false, err
			}
		}
		res, err := runAudit(ctx, tx, j, a, sealed, r.st.Snapshot, r.opts.External)
		if err != nil {
			return false, fmt.Errorf("job %s: audit %s (line %d of %s): %w", j.Name, a.Name, a.Line, j.File, err)
		}
		r.res.Audits = append(r.res.Audits, res)
		if res.Violations > 0 && a.Severity == job.SeverityError {
			failed = append(failed, res)
		}
	}
	if len(failed) > 0 {
		return false, &AuditError{Job: j.Name, Results: failed}
	}
	return true, nil
}

// auditNote is what the run log keeps of the warn audits that found
// violations.
func auditNote(results []AuditResult) string {
	var parts []string
	for _, r := range results {
		if r.Violations > 0 {
			parts = append(parts, fmt.Sprintf("audit %s (%s, %s) found %d violation(s)", r.Name, r.Kind, r.Severity, r.Violations))
		}
	}
	return strings.Join(parts, "; ")
}

// runAudit counts audit a's violations in j's target and names the first.
// parent is the job's latest committed snapshot (0: none), which a
// row_count's max_change_pct compares with. external names the jobs read
// from another idem database attached under the catalog given (an
// environment reads production's jobs it does not build).
func runAudit(ctx context.Context, tx *sql.Tx, j *job.Job, a job.Audit, sealed *sealedRun, parent int64, external map[string]string) (AuditResult, error) {
	res := AuditResult{Name: a.Name, Kind: a.Kind, Severity: a.Severity, Rows: []string{}}
	target := "main." + sqltext.QuoteIdent(j.Table)
	quoted := make([]string, 0, len(a.AuditColumns()))
	for _, c := range a.AuditColumns() {
		quoted = append(quoted, sqltext.QuoteIdent(c))
	}
	list := strings.Join(quoted, ", ")
	var violating string
	switch a.Kind {
	case job.AuditUnique:
		violating = "SELECT " + list + ", count(*) AS idem_rows FROM " + target + " GROUP BY ALL HAVING count(*) > 1"
	case job.AuditNotNull:
		violating = "SELECT * FROM " + target + " WHERE " + strings.Join(quoted, " IS NULL OR ") + " IS NULL"
	case job.AuditAcceptedValues:
		lits := make([]string, len(a.Values))
		for i, v := range a.Values {
			lits[i] = sqltext.SQLString(v)
		}
		violating = "SELECT " + list + ", count(*) AS idem_rows FROM " + target + " WHERE " + list + " IS NOT NULL AND CAST(" + list + " AS VARCHAR) NOT IN (" + strings.Join(lits, ", ") + ") GROUP BY ALL"
	case job.AuditRowCount:
		var n int64
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+target).Scan(&n); err != nil {
			return res, catalog.TrimSQLError(err)
		}
		if (a.Min != nil && n < *a.Min) || (a.Max != nil && n > *a.Max) {
			res.Violations = 1
			res.Rows = append(res.Rows, fmt.Sprintf("%d rows, %s", n, countBounds(a.Min, a.Max)))
		}
		if a.MaxChangePct != nil && parent > 0 {
			var prev int64
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(rows_out, 0) FROM idem.snapshots WHERE job = ? AND snapshot = ?`, j.Name, parent).Scan(&prev); err != nil {
				return res, fmt.Errorf("rows of snapshot %d: %w", parent, err)
			}
			change := 0.0
			switch {
			case prev > 0:
				change = 100 * math.Abs(float64(n-prev)) / float64(prev)
			case n > 0:
				change = math.Inf(1)
			}
			if change > *a.MaxChangePct {
				res.Violations++
				res.Rows = append(res.Rows, fmt.Sprintf("%d rows against %d at snapshot %d, a change of %.1f%%, above %g%%", n, prev, parent, change, *a.MaxChangePct))
			}
		}
		return res, nil
	case job.AuditRelationships:
		other, col, _ := strings.Cut(a.To, ".")
		to, err := relationshipsTarget(ctx, tx, j, other, external)
		if err != nil {
			return res, fmt.Errorf("relationships audit %s: %w", a.Name, err)
		}
		violating = "SELECT t." + list + ", count(*) AS idem_rows FROM " + target + " AS t WHERE t." + list + " IS NOT NULL AND NOT EXISTS (SELECT 1 FROM " + to + " AS o WHERE o." + sqltext.QuoteIdent(col) + " = t." + list + ") GROUP BY ALL"
	case job.AuditSQL:
		violating = j.Expand(a.SQL)
		root, err := sealed.explain(ctx, tx, pipeline.Step{Name: "audit " + a.Name}, a.Line, violating)
		if err != nil {
			return res, err
		}
		if !planAgrees(seal.Statement{Kind: seal.StmtQuery}, root) {
			return res, report.Usage("job %s: audit %s line %d: an audit is one query, and DuckDB plans %s; nothing committed", j.Name, a.Name, a.Line, root)
		}
	}
	for _, q := range []string{violating, "SELECT count(*) FROM (" + violating + ")"} {
		if err := OneStatement(q); err != nil {
			return res, fmt.Errorf("audit %s: %w", a.Name, err)
		}
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM ("+violating+")").Scan(&res.Violations); err != nil {
		return res, catalog.TrimSQLError(err)
	}
	if res.Violations == 0 {
		return res, nil
	}
	rows, err := tx.QueryContext(ctx, "SELECT * FROM ("+violating+") ORDER BY ALL LIMIT "+fmt.Sprint(auditRows))
	if err != nil {
		return res, catalog.TrimSQLError(err)
	}
	defer rows.Close()
	got, err := Collect(rows)
	if err != nil {
		return res, err
	}
	for _, vals := range got.Values {
		parts := make([]string, len(got.Columns))
		for i, c := range got.Columns {
			parts[i] = fmt.Sprintf("%s=%v", c, cellText(vals[i]))
		}
		res.Rows = append(res.Rows, strings.Join(parts, ", "))
	}
	return res, nil
}

func countBounds(lo, hi *int64) string {
	switch {
	case lo != nil && hi != nil:
		return fmt.Sprintf("expected %d to %d", *lo, *hi)
	case lo != nil:
		return fmt.Sprintf("expected at least %d", *lo)
	default:
		return fmt.Sprintf("expected at most %d", *hi)
	}
}

func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(x)
	default:
		return fmt.Sprint(x)
	}
}

// relationshipsTarget is the relation a relationships audit of j reads job
// other's rows from: j's own target as the run leaves it, or other's
// target as committed, read inside the run's transaction, which pinned it
// (an upstream's pinned snapshot is its latest committed one in that same
// transaction); from production when the run reads other from there (an
// environment that does not build it), else from the run's own database
// (production, or the environment building other). A project runs other
// first (project.New), so a fresh database and a nightly arrival of new
// rows in other are checked against what other just committed.
func relationshipsTarget(ctx context.Context, tx *sql.Tx, j *job.Job, other string, external map[string]string) (string, error) {
	if other == j.Name {
		return "main." + sqltext.QuoteIdent(j.Table), nil
	}
	cat, ext := external[other]
	st, err := catalog.ReadState(ctx, tx, other)
	where := "this database"
	if ext {
		st, err = catalog.ReadStateIn(ctx, tx, cat, other)
		where = "the database attached as " + cat
	}
	if err != nil {
		return "", err
	}
	if !st.Exists || st.Snapshot == 0 || st.Target == "" {
		return "", report.Usage("job %s has no committed snapshot in %s to check against: run it first, or run the project (it runs %s before %s)", other, where, other, j.Name)
	}
	if ext {
		return sqltext.QuoteIdent(cat) + ".main." + sqltext.QuoteIdent(st.Target), nil
	}
	return "main." + sqltext.QuoteIdent(st.Target), nil
}
