package job

import (
	"fmt"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
	"slices"
	"strings"
)

// Audit is one [[audit]] of a job file: a check of the job's target as the
// run leaves it, inside the run's transaction before COMMIT. An audit of
// severity "error" (the default) that finds violations fails the run (exit
// 1, nothing committed); one of severity "warn" commits and reports them.
// Audits say whether a snapshot may be committed, never what it holds, so
// they are not part of the job key.
type Audit struct {
	// Name defaults to the kind and its columns ("unique_order_id").
	Name string `toml:"name"`
	// Kind is unique, not_null, accepted_values, row_count or sql.
	Kind string `toml:"kind"`
	// Columns are the columns of unique and not_null; Column and Values
	// those of accepted_values.
	Columns []string `toml:"columns"`
	Column  string   `toml:"column"`
	Values  []string `toml:"values"`
	// Min and Max bound row_count; MaxChangePct bounds its change, in
	// percent, against the job's previous snapshot's rows.
	Min          *int64   `toml:"min"`
	Max          *int64   `toml:"max"`
	MaxChangePct *float64 `toml:"max_change_pct"`
	// To is a relationships audit's "JOB.COLUMN": every non-NULL value of
	// Column must be in that job's target, as last committed.
	To string `toml:"to"`
	// SQL is the SELECT of a sql audit: the rows it returns are the
	// violations. It reads what the job's steps may read ({{table}},
	// {{upstream:NAME}}) and is sealed as they are.
	SQL      string `toml:"sql"`
	Severity string `toml:"severity"`
	// Line is the line of its [[audit]] header in the job file.
	Line int `toml:"-"`
}

// The kinds and severities of an audit.
const (
	AuditUnique         = "unique"
	AuditNotNull        = "not_null"
	AuditAcceptedValues = "accepted_values"
	AuditRowCount       = "row_count"
	AuditRelationships  = "relationships"
	AuditSQL            = "sql"
	SeverityError       = "error"
	SeverityWarn        = "warn"
)

var auditKinds = strings.Join([]string{AuditUnique, AuditNotNull, AuditAcceptedValues, AuditRowCount, AuditRelationships, AuditSQL}, ", ")

// applyAudits checks the job file's [[audit]] tables and binds them.
// Errors are *JobFileError naming the audit's line.
func (j *Job) applyAudits(data []byte, audits []Audit) error {
	names := map[string]bool{}
	for i, a := range audits {
		a.Line = jobfs.ArrayTableLine(data, "audit", i)
		bad := func(msg string, args ...any) error {
			return &report.JobFileError{File: j.File, Line: a.Line, Key: fmt.Sprintf("audit[%d]", i+1), Msg: fmt.Sprintf(msg, args...)}
		}
		switch a.Severity {
		case "":
			a.Severity = SeverityError
		case SeverityError, SeverityWarn:
		default:
			return bad("severity must be %q or %q (got %q)", SeverityError, SeverityWarn, a.Severity)
		}
		cols := a.Columns
		switch a.Kind {
		case AuditUnique, AuditNotNull:
			if len(a.Columns) == 0 {
				return bad("a %s audit names its columns = [...]", a.Kind)
			}
		case AuditAcceptedValues:
			if a.Column == "" || len(a.Values) == 0 {
				return bad("an accepted_values audit names its column = \"...\" and values = [...]")
			}
			cols = []string{a.Column}
		case AuditRowCount:
			if a.Min == nil && a.Max == nil && a.MaxChangePct == nil {
				return bad("a row_count audit sets min, max, max_change_pct or several")
			}
			if a.MaxChangePct != nil && *a.MaxChangePct < 0 {
				return bad("row_count max_change_pct must not be negative (got %g)", *a.MaxChangePct)
			}
			if a.Min != nil && a.Max != nil && *a.Min > *a.Max {
				return bad("row_count min %d is above max %d", *a.Min, *a.Max)
			}
		case AuditRelationships:
			other, col, ok := strings.Cut(a.To, ".")
			if a.Column == "" || !ok || other == "" || col == "" {
				return bad("a relationships audit names its column = \"...\" and to = \"JOB.COLUMN\"")
			}
			cols = []string{a.Column}
		case AuditSQL:
			if strings.TrimSpace(a.SQL) == "" {
				return bad("a sql audit gives sql = \"SELECT ...\" (its rows are the violations)")
			}
			masked := sqltext.MaskSQL(a.SQL)
			stmts := sqltext.SplitStatements(masked)
			if len(stmts) != 1 || seal.ClassifyStatement(a.SQL[stmts[0].Start:stmts[0].End], masked[stmts[0].Start:stmts[0].End]).Kind != seal.StmtQuery {
				return bad("a sql audit is one SELECT (its rows are the violations)")
			}
		case "":
			return bad("an audit names its kind: %s", auditKinds)
		default:
			return bad("unknown audit kind %q: %s", a.Kind, auditKinds)
		}
		for _, c := range cols {
			if strings.TrimSpace(c) == "" {
				return bad("an empty column name")
			}
		}
		if a.Kind != AuditSQL && a.SQL != "" {
			return bad("sql applies to a sql audit")
		}
		if a.Name == "" {
			a.Name = strings.Join(append([]string{a.Kind}, cols...), "_")
		}
		if !sqltext.Identifier.MatchString(a.Name) {
			return bad("audit name %q must be letters, digits and underscores, starting with a letter", a.Name)
		}
		if names[a.Name] {
			return bad("audit %s is declared twice (give each a name)", a.Name)
		}
		names[a.Name] = true
		j.Audits = append(j.Audits, a)
	}
	return nil
}

// AuditColumns are the target columns audit a reads by name (none for
// row_count and sql).
func (a Audit) AuditColumns() []string {
	if a.Kind == AuditAcceptedValues || a.Kind == AuditRelationships {
		return []string{a.Column}
	}
	return slices.Clone(a.Columns)
}

// AuditUpstream lists the other jobs the job's relationships audits check
// against (to = "JOB.COLUMN"), by name: a project runs them before the job,
// as it runs its upstreams, so that the audit reads what they committed in
// the same run. They are not upstreams: the job's rows and key do not
// depend on them.
func (j *Job) AuditUpstream() []string {
	var out []string
	for _, a := range j.Audits {
		if a.Kind != AuditRelationships {
			continue
		}
		if other, _, _ := strings.Cut(a.To, "."); other != j.Name && !slices.Contains(out, other) {
			out = append(out, other)
		}
	}
	slices.Sort(out)
	return out
}
