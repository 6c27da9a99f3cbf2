package seal

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// A job's SQL is sealed: a step reads only its declared relations (its
// upstreams, its staged input, its own target and companions, and the
// temporary relations idem and its steps make) and writes only its own
// tables. This file holds the checks that need no database: the kind and
// target of every statement (read from its leading keywords), and every
// relation, table function and volatile function its queries name (read
// from DuckDB's parse, json_serialize_sql). The run adds what needs the
// database: names DuckDB binds (EXPLAIN) and the other tables' identity
// after the steps (internal/run).

// Violation is one construct of a job's SQL that idem refuses, with where
// it is and how to fix it.
type Violation struct {
	File      string // the step or model file
	Line      int
	Construct string // what was refused, as written: read_csv(), COPY, idem.state
	Volatile  bool   // a function that gives another value on every run
	Message   string
	Fix       string
}

func (v Violation) Error() string {
	return fmt.Sprintf("%s line %d: %s: %s", v.File, v.Line, v.Message, v.Fix)
}

// Seal is what a job's SQL may read and write.
type Seal struct {
	// Own are the job's tables and views in the database's main schema:
	// its target, its companions ({{table:_suffix}}) and its outcomes table.
	Own map[string]bool
	// Temp are the temporary relations idem makes for every run and those
	// the job's steps create TEMP.
	Temp map[string]bool
	// Upstream are the relations {{upstream:NAME}} reads
	// (idem_upstream_NAME).
	Upstream map[string]bool
	// Declared are names a common table expression may not take: they look
	// like a declared upstream (its relation, or the upstream job's name).
	// The job's own names are left to its pipeline, whose steps may well
	// name a CTE like the job (a job named raw, a CTE raw).
	Declared map[string]bool
	// Macros are the macros of the job's macros folder it uses (macro.go):
	// a table macro is called like a table function.
	Macros map[string]bool

	funcs *Functions // what Check was given

	// Fresh is the target of a refresh job whose snapshot must be its
	// input's alone (not partitioned, not incremental), lower case, or
	// "": until a step empties it (DELETE without WHERE, TRUNCATE, CREATE
	// OR REPLACE TABLE), a step may neither read it nor add to it, since
	// a rerun rebuilds the snapshot from an empty target.
	Fresh   string
	emptied bool // a step emptied Fresh
	inStep  bool // Check is reading a step (SealedText.Step)
	macro   bool // Check is reading a macro (checkMacro): no relation by name
}

// SealedText is one SQL text of a job to check, with the file it names.
type SealedText struct {
	File string
	SQL  string // expanded (placeholders replaced)
	// Model is where the model's SELECT lies in SQL (a model job's step),
	// and ModelFile its file, so that findings there name that file.
	Model     sqltext.Span
	ModelFile string
	// Step is set for a step of the pipeline or a model (not a schema
	// file, not an audit): steps run in order, each over what the one
	// before left.
	Step bool
	// Macro is set for a macro of the job's macros folder (macro.go): its
	// CREATE TEMP MACRO as the run executes it.
	Macro bool
}

// where names the file and line of offset off in t.
func (t SealedText) where(off int) (string, int) {
	if t.ModelFile != "" && off >= t.Model.Start && off < t.Model.End {
		return t.ModelFile, 1 + strings.Count(t.SQL[t.Model.Start:off], "\n")
	}
	return t.File, 1 + strings.Count(t.SQL[:min(off, len(t.SQL))], "\n")
}

// NameAt is a relation a query reads by a plain name that is none of the
// job's: the run looks it up in the database.
type NameAt struct {
	Name      string
	Written   string // as written: [catalog.][schema.]name
	File      string
	Line      int
	Statement int // index of the statement in its text
}

// Parser is what the seal asks DuckDB: a query's parse tree, how many
// statements a text holds, and what its function catalog says of each
// function.
type Parser struct {
	Parse sqltext.ParseFunc
	Count sqltext.CountFunc
	Funcs *Functions
}

// Check checks one text: that DuckDB reads the statements idem reads
// (Statements), every statement's kind and write target, its volatile and
// session functions, and the relations and table functions its queries
// read. It returns the violations and the plain names it could not judge
// without the database (see NameAt).
func (s *Seal) Check(t SealedText, p Parser) ([]Violation, []NameAt, error) {
	if t.Macro && !s.macro {
		vs, err := checkMacro(t, p, s.Macros)
		return vs, nil, err
	}
	masked := sqltext.MaskSQL(t.SQL)
	funcs := p.Funcs
	if funcs == nil {
		funcs = DefaultFunctions()
	}
	spans, err := sqltext.Statements(t.SQL, p.Count)
	var split *sqltext.SplitError
	if errors.As(err, &split) {
		// DuckDB's parser makes a PIVOT several statements of its own
		// (the enum types of its columns): refused for what it is.
		var pivots []Violation
		for _, m := range unparsed.FindAllStringIndex(masked, -1) {
			pivots = append(pivots, pivotViolation(t, m[0], strings.ToUpper(masked[m[0]:m[1]])))
		}
		if len(pivots) > 0 {
			return pivots, nil, nil
		}
		off := max(split.At, 0)
		file, line := t.where(off)
		return []Violation{{File: file, Line: line, Construct: "statements",
			Message: split.Error() + ": a quote, comment or semicolon that idem reads another way than DuckDB, so what idem checks would not be what runs",
			Fix:     "end every statement with ; outside strings and comments, and write strings as '...' ($$...$$ and E'...' are read too, but not when they hide a ;)"}}, nil, nil
	} else if err != nil {
		return nil, nil, err
	}
	var out []Violation
	if t.ModelFile != "" && t.Model.End > t.Model.Start {
		// idem wraps the model's SELECT in queries of its own (a plan's
		// comparison, an incremental run, an erasure's recompute): it must
		// be one query that closes every parenthesis it opens.
		model := t.SQL[t.Model.Start:t.Model.End]
		n, err := p.Count(model)
		if sqltext.ClosingParen(sqltext.MaskSQL(model), 0) < len(model) || (err == nil && n != 1) {
			file, line := t.where(t.Model.Start)
			return []Violation{{File: file, Line: line, Construct: "model",
				Message: "the model is not one SELECT to DuckDB's parser (a ; or an unopened ) outside strings and comments): idem runs it inside queries of its own",
				Fix:     "write the model as one SELECT, without a ; between statements"}}, nil, nil
		}
	}
	var unknown []NameAt
	temp := maps.Clone(s.Temp)
	s.funcs = funcs
	s.inStep = t.Step
	for i, sp := range spans {
		text, mtext := t.SQL[sp.Start:sp.End], masked[sp.Start:sp.End]
		at := func(off int) (string, int) { return t.where(sp.Start + off) }
		st := ClassifyStatement(text, mtext)
		if v, ok := s.checkWrite(st, temp); !ok {
			v.File, v.Line = at(st.At)
			out = append(out, v)
		}
		TrackTemp(st, temp)
		emptiesFresh := false
		if s.Fresh != "" && t.Step && !s.emptied && s.ownTarget(st.Target, nil) && strings.EqualFold(st.Target[len(st.Target)-1], s.Fresh) {
			switch {
			case st.Kind == StmtTruncate, st.Kind == StmtDelete && !whereClause.MatchString(mtext):
				s.emptied = true // reads nothing first (its FROM target is no query)
			case st.Kind == StmtCreate && st.Object == "TABLE" && st.Replace:
				emptiesFresh = true // after its query, which reads the target as it was
			case st.Kind == StmtInsert, st.Kind == StmtUpdate, st.Kind == StmtMerge, st.Kind == StmtDelete:
				file, line := at(st.At)
				out = append(out, freshViolation(file, line, st.Keyword+" "+strings.Join(st.Target, "."), "keeps rows of the job's previous snapshot"))
			}
		}
		out = append(out, funcs.calls(text, at)...)
		for _, m := range unparsed.FindAllStringIndex(mtext, -1) {
			out = append(out, pivotViolation(t, sp.Start+m[0], strings.ToUpper(mtext[m[0]:m[1]])))
		}
		queries, err := sqltext.StatementQueries(text, mtext, p.Parse)
		if err != nil {
			return nil, nil, err
		}
		for _, q := range queries {
			vs, names := s.checkQuery(q.Node, temp)
			for _, v := range vs {
				v.File, v.Line = at(q.Start + v.Line)
				out = append(out, v)
			}
			for _, n := range names {
				file, line := at(q.Start + n.Line)
				unknown = append(unknown, NameAt{Name: n.Name, Written: n.Written, File: file, Line: line, Statement: i})
			}
		}
		if emptiesFresh {
			s.emptied = true
		}
	}
	return out, unknown, nil
}

// calls finds the functions of a statement that give another value on
// every run, or read the catalog, the session or the engine: every name
// called (quoted or not, qualified or not) that DuckDB's function catalog
// calls volatile (f), and the clock's keywords (current_timestamp).
func (f *Functions) calls(text string, at func(int) (string, int)) []Violation {
	var out []Violation
	for _, c := range CalledNames(text) {
		switch {
		case c.Call && f.Volatile[c.Name]:
			out = append(out, volatile(c.Name+"()", c.At, at))
		case !c.Call && NondeterministicRefs[c.Name]:
			out = append(out, volatile(c.Name, c.At, at))
		case c.Call && outsideFunctions[c.Name] != "":
			file, line := at(c.At)
			out = append(out, Violation{File: file, Line: line, Construct: c.Name + "()",
				Message: c.Name + "() " + outsideFunctions[c.Name] + ": the same inputs could give other bytes",
				Fix:     "bind the value as a param (part of the job key)"})
		case c.Call && f.Session[c.Name]:
			file, line := at(c.At)
			out = append(out, Violation{File: file, Line: line, Construct: c.Name + "()",
				Message: c.Name + "() reads the database's catalog, the session or the engine, not the job's rows: the same inputs could give other bytes",
				Fix:     "bind the value as a param (part of the job key), or derive it from the input"})
		}
	}
	return out
}

// whereClause finds a WHERE outside strings and comments (masked text).
var whereClause = regexp.MustCompile(`(?i)\bWHERE\b`)

func freshViolation(file string, line int, construct, what string) Violation {
	return Violation{File: file, Line: line, Construct: construct,
		Message: fmt.Sprintf("%s %s before a step empties it: a refresh job's snapshot is its input's alone, and a rerun rebuilds it from an empty target", construct, what),
		Fix:     "empty the target first (DELETE FROM {{table}}; or CREATE OR REPLACE TABLE {{table}} AS ...), or make the job an apply job"}
}

func pivotViolation(t SealedText, off int, kw string) Violation {
	file, line := t.where(off)
	return Violation{File: file, Line: line, Construct: kw,
		Message: kw + " is a query DuckDB's parser does not give out (json_serialize_sql), so idem cannot tell which relations it reads",
		Fix:     "write it as GROUP BY with aggregates over CASE or FILTER (a pivot), or UNION ALL (an unpivot)"}
}

func volatile(construct string, off int, at func(int) (string, int)) Violation {
	file, line := at(off)
	return Violation{File: file, Line: line, Construct: construct, Volatile: true,
		Message: construct + " gives another value on every run: the same input would not give the same rows",
		Fix:     "derive the value from the input, or bind it as a param (part of the job key)"}
}

// unparsed matches the query keywords whose queries json_serialize_sql
// refuses to serialize, wherever they stand.
var unparsed = regexp.MustCompile(`(?i)\b(PIVOT|UNPIVOT|PIVOT_WIDER|PIVOT_LONGER)\b`)

// readTableFunctions are the table functions a step may call: each makes
// rows from its arguments alone.
var readTableFunctions = map[string]bool{
	"range": true, "generate_series": true, "unnest": true, "json_each": true, "json_tree": true,
	"generate_subscripts": true,
}

// outsideFunctions are scalar functions that read outside the job's
// inputs.
var outsideFunctions = map[string]string{
	"getenv":          "reads the environment of the process",
	"current_setting": "reads a setting of the database, which idem may set per run",
}

type nameLoc struct {
	Name    string
	Written string
	Line    int // offset in the query, until Check makes it a line
}

// checkQuery walks one parsed query: relations by name (CTEs in scope
// resolve first, as DuckDB binds them), table functions, scalar functions
// that read outside the job, and samples without a seed. temp are the
// temporary relations made so far. Violation.Line holds an offset in the
// query.
func (s *Seal) checkQuery(node map[string]any, temp map[string]bool) ([]Violation, []nameLoc) {
	var out []Violation
	var unknown []nameLoc
	refuse := func(m map[string]any, construct, msg, fix string) {
		out = append(out, Violation{Line: QueryLocation(m), Construct: construct, Message: msg, Fix: fix})
	}
	var walk func(v any, scope []string)
	walk = func(v any, scope []string) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e, scope)
			}
			return
		case map[string]any:
			cm, hasCTEs := x["cte_map"].(map[string]any)
			if hasCTEs {
				// Each common table expression sees those before it (and
				// itself when recursive), as DuckDB binds them: a name it
				// reads that a later sibling defines is a table.
				entries, _ := cm["map"].([]any)
				for _, e := range entries {
					em, _ := e.(map[string]any)
					name, _ := em["key"].(string)
					if name == "" {
						continue
					}
					if s.Declared[strings.ToLower(name)] && !s.importCTE(name, em["value"]) {
						refuse(x, "WITH "+name, fmt.Sprintf("common table expression %s has the name of a relation the job reads, so the query reads something other than what it names", name),
							"give the CTE a name of its own")
					}
					body := em["value"]
					own := append(slices.Clip(scope), strings.ToLower(name))
					if isRecursiveCTE(body) {
						walk(body, own)
					} else {
						walk(body, scope)
					}
					scope = own
				}
			}
			s.checkNode(x, scope, temp, refuse, &unknown)
			for _, k := range report.SortedKeys(x) {
				if k == "cte_map" && hasCTEs {
					continue
				}
				walk(x[k], scope)
			}
		}
	}
	walk(node, nil)
	return out, unknown
}

// importCTE reports whether a common table expression named like an
// upstream job reads that job's relation ({{upstream:NAME}}): an import
// CTE, as dbt users write them (WITH orders AS (SELECT * FROM
// {{upstream:orders}})). It shadows nothing the job did not declare: the
// name stands for the upstream's rows, narrowed by the body. A CTE named
// like the upstream that does not read it would put other rows under the
// upstream's name, and stays refused.
func (s *Seal) importCTE(name string, body any) bool {
	rel := strings.ToLower(UpstreamRelation(name))
	if !s.Upstream[rel] {
		return false // idem_upstream_x itself, never a CTE's name
	}
	found := false
	sqltext.WalkJSON(body, func(m map[string]any) {
		if t, _ := m["table_name"].(string); m["type"] == "BASE_TABLE" && strings.ToLower(t) == rel {
			found = true
		}
	})
	return found
}

// isRecursiveCTE reports whether a common table expression's parse (its
// cte_map value) is WITH RECURSIVE's: its body may read its own name.
func isRecursiveCTE(v any) bool {
	m, _ := v.(map[string]any)
	q, _ := m["query"].(map[string]any)
	n, _ := q["node"].(map[string]any)
	return n["type"] == "RECURSIVE_CTE_NODE"
}

// dotted writes a name as the query did: its non-empty parts joined by
// dots.
func dotted(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), ".")
}

// QueryLocation is a parsed node's offset in its query
// (query_location), or 0 when the parse gives none.
func QueryLocation(m map[string]any) int {
	loc, _ := m["query_location"].(float64)
	if loc < 0 || loc > 1<<40 {
		return 0
	}
	return int(loc)
}

// checkNode checks one node of a parsed query.
func (s *Seal) checkNode(x map[string]any, scope []string, temp map[string]bool,
	refuse func(m map[string]any, construct, msg, fix string), unknown *[]nameLoc) {
	const declare = "declare the job it belongs to in [input] upstream and read it as {{upstream:NAME}}"
	switch {
	case x["type"] == "BASE_TABLE":
		cat, _ := x["catalog_name"].(string)
		sch, _ := x["schema_name"].(string)
		name, _ := x["table_name"].(string)
		written := dotted(cat, sch, name)
		lower := strings.ToLower(name)
		switch {
		case cat == "" && sch == "" && slices.Contains(scope, lower):
			// a common table expression in scope
		case strings.ContainsAny(name, "./\\:*?"):
			refuse(x, "'"+name+"'", fmt.Sprintf("FROM '%s' reads a file outside the job's declared inputs", name),
				"read the file as the [input] of a job, and that job as {{upstream:NAME}}")
		case s.macro:
			*unknown = append(*unknown, nameLoc{Name: name, Written: written, Line: QueryLocation(x)})
		case strings.EqualFold(cat, "temp") || (cat == "" && strings.EqualFold(sch, "temp")):
			// a temporary relation of this run
		case (cat != "" && !strings.EqualFold(cat, StoreCatalog)) || (sch != "" && !strings.EqualFold(sch, "main")):
			refuse(x, written, fmt.Sprintf("reads %s, outside the job's declared relations", written), declare)
		case s.Own[lower] && lower == s.Fresh && s.inStep && !s.emptied && !(cat == "" && sch == "" && temp[lower]):
			out := freshViolation("", 0, written, "reads the job's previous snapshot")
			refuse(x, out.Construct, out.Message, out.Fix)
		case s.Own[lower] || s.Upstream[lower] || (cat == "" && sch == "" && temp[lower]):
		case s.funcs != nil && s.funcs.Views[lower] || strings.EqualFold(sch, "pg_catalog") || strings.EqualFold(sch, "information_schema"):
			refuse(x, written, fmt.Sprintf("%s is a view of the database's catalog: it reads other jobs' tables, their rows and the file's path, outside the job's declared relations", written), declare)
		default:
			*unknown = append(*unknown, nameLoc{Name: name, Written: written, Line: QueryLocation(x)})
		}
	case x["type"] == "TABLE_FUNCTION":
		f, _ := x["function"].(map[string]any)
		name, _ := f["function_name"].(string)
		lower := strings.ToLower(name)
		if readTableFunctions[lower] || s.Macros[lower] {
			return // a table macro's body is checked as a macro (checkMacro)
		}
		msg := fmt.Sprintf("%s() reads outside the job's declared relations", lower)
		fix := "read files as the [input] of a job, and other jobs' rows as {{upstream:NAME}}"
		switch {
		case lower == "query" || lower == "query_table":
			msg = fmt.Sprintf("%s() reads a relation whose name is built at run time, so idem cannot tell which", lower)
			fix = "name the relation in the query: {{upstream:NAME}}, or the job's own tables"
		case strings.HasPrefix(lower, "read_") || strings.Contains(lower, "scan") || lower == "glob" || lower == "sniff_csv":
			msg = fmt.Sprintf("%s() reads files outside the job's declared inputs", lower)
		case strings.HasPrefix(lower, "duckdb_") || strings.HasPrefix(lower, "pragma_"):
			msg = fmt.Sprintf("%s() reads the database's catalog, which holds other jobs' tables", lower)
		}
		refuse(x, lower+"()", msg, fix)
	case x["class"] == "FUNCTION":
		name, _ := x["function_name"].(string)
		cat, _ := x["catalog"].(string)
		sch, _ := x["schema"].(string)
		if cat != "" || (sch != "" && !strings.EqualFold(sch, "main") && !strings.EqualFold(sch, "temp")) {
			written := dotted(cat, sch, name)
			refuse(x, written+"()", fmt.Sprintf("%s() calls a function of another schema", written), "call functions by their plain name")
		}
	}
	if sm, ok := x["sample"].(map[string]any); ok {
		if seed, _ := sm["seed"].(float64); seed < 0 {
			refuse(x, "USING SAMPLE", "a sample without a seed keeps other rows on every run", "give the sample a seed: USING SAMPLE 10% (bernoulli, 42)")
		}
	}
}

// StoreCatalog is the name idem attaches the database file under.
const StoreCatalog = "idem_store"

// UpstreamRelation is the temporary relation a step reads upstream job
// name's rows from: {{upstream:NAME}} expands to it. The run makes it hold
// that job's target as committed at the snapshot pinned for the run.
func UpstreamRelation(name string) string { return "idem_upstream_" + name }
