package lint

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"

	"github.com/BurntSushi/toml"
)

// Lint finding ids.
const (
	NoKey             = "L001"       // apply job or pipeline without key columns
	WindowOrder       = "L002"       // order-sensitive window whose ORDER BY is not total
	Nondeterministic  = "L003"       // now(), random(), uuid() ...
	UnorderedOutput   = "L004"       // COPY, INSERT or order-sensitive aggregate without ORDER BY
	UnusedParam       = "L005"       // param declared, never read with getvariable
	OutcomesNotStored = "L006"       // outcomes_table declared, no step stores rows in it
	LimitOrder        = "L007"       // LIMIT without an ORDER BY that is total
	StepContract      = "L008"       // a step does not create staged, outcomes or idem_touched
	UndeclaredRead    = "L009"       // a step or model reads a table that is not a declared upstream
	Sealed            = "L010"       // a step reads or writes outside the job (other schemas, files, COPY, SET ...)
	StreamNoKey       = "STREAM-001" // an apply job on a stream whose pipeline has no key
	StreamFastPoll    = "STREAM-002" // a stream's max_wait under 100 ms
)

// Severities of a finding. Errors make idem lint exit 1.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Finding is one problem idem lint found, with where it is and how to fix it.
type Finding struct {
	ID       string `json:"id"`
	Severity string `json:"severity"`
	File     string `json:"file"`
	Line     int    `json:"line,omitempty"`
	Message  string `json:"message"`
	Fix      string `json:"fix"`
}

// Report is idem lint's result for one job.
type Report struct {
	Job      string    `json:"job"`
	Pipeline string    `json:"pipeline"`
	Findings []Finding `json:"findings"`
	Errors   int       `json:"errors"`
	Warnings int       `json:"warnings"`
}

// Check loads the job file at path and checks its pipeline's transform
// and schema SQL for plans that would not re-run safely. A job file that
// cannot be loaded is returned as an error (exit 2), except a missing key,
// which is finding L001.
//
// The SQL is read with DuckDB's own parser (json_serialize_sql) for every
// query inside a statement. Conventions the checks rely on: the columns
// named by the key, and _row (the stage step's row number), are unique per
// row; row_number() OVER () numbers rows in input order.
func Check(ctx context.Context, jobPath string, builtins fs.FS) (*Report, error) {
	data, err := jobfs.ReadJobFile(jobPath)
	if err != nil {
		return nil, err
	}
	rep := &Report{Findings: []Finding{}}
	j, err := run.ParseJobLenient(jobPath, data, builtins)
	if err != nil {
		if errors.Is(err, report.ErrNoKey) {
			var jfe *report.JobFileError
			errors.As(err, &jfe)
			var head struct {
				Name, Pipeline string
				Input          struct{ Kind string }
			}
			_, _ = toml.Decode(string(data), &head)
			rep.Job, rep.Pipeline = head.Name, head.Pipeline
			rep.add(Finding{ID: NoKey, Severity: SeverityError, File: jfe.File, Line: jfe.Line,
				Message: "the job applies batches without key columns: a replayed batch would double its rows",
				Fix:     `declare the key: key = ["..."] in [target]`})
			if head.Input.Kind == job.KindKafka || head.Input.Kind == job.KindSSE {
				rep.add(streamNoKey(jobPath, data, head.Input.Kind))
			}
			return rep, nil
		}
		return nil, err
	}
	rep.Job, rep.Pipeline = j.Name, j.Pipeline.Name
	origin := lintPath(j.Pipeline.Origin())
	if j.Pipeline.Mode == pipeline.ModeApply && len(j.Pipeline.Key) == 0 {
		rep.add(Finding{ID: NoKey, Severity: SeverityError, File: path.Join(origin, "pipeline.toml"),
			Message: fmt.Sprintf("apply pipeline %s declares no key columns: a replayed batch would double its rows, and history cannot track rows", j.Pipeline.Name),
			Fix:     `declare key = ["..."] in pipeline.toml`})
	}

	if j.IsStream() {
		lintStream(j, data, rep)
	}

	db, err := run.OpenMemory(ctx, "?autoinstall_known_extensions=false&threads=1")
	if err != nil {
		return nil, fmt.Errorf("open scratch database for lint: %w", err)
	}
	defer db.Close()
	l := &linter{ctx: ctx, db: db, j: j, rep: rep, seal: j.Seal(), parsed: map[string]parsedQuery{}}
	files := make([]lintFile, 0, len(j.Steps)+1)
	if j.IsModel() {
		// A model is linted as the user wrote it, in its own file; the
		// select pipeline's wrapper around it keeps the step contract.
		text, err := os.ReadFile(j.ModelFile)
		if err != nil {
			return nil, fmt.Errorf("lint: read model: %w", err)
		}
		files = append(files, lintFile{name: lintPath(j.ModelFile), text: j.Expand(job.RefsAsUpstream(string(text))), step: true})
	} else {
		for _, s := range j.Steps {
			files = append(files, lintFile{name: path.Join(origin, fmt.Sprintf("transform/v%d", j.TransformVersion), s.Name), text: j.Expand(s.SQL), step: true})
		}
		files = append(files, lintFile{name: path.Join(origin, fmt.Sprintf("schema/v%d.sql", j.SchemaVersion)), text: j.Expand(j.DDL)})
	}
	for _, f := range files {
		if err := l.file(f); err != nil {
			return nil, err
		}
	}
	// The macros it calls, sealed like its SQL (seal.Macro).
	for _, m := range j.Macros {
		if err := l.file(lintFile{name: m.File, text: m.Create, macro: true}); err != nil {
			return nil, err
		}
	}
	shadowed, err := run.ShadowedMacros(ctx, db, j)
	if err != nil {
		return nil, err
	}
	for _, v := range shadowed {
		rep.add(Finding{ID: Sealed, Severity: SeverityError, File: v.File, Line: v.Line, Message: v.Message, Fix: v.Fix})
	}

	// Params declared and never read.
	for _, name := range report.SortedKeys(j.Pipeline.Params) {
		read := regexp.MustCompile(`(?i)getvariable\s*\(\s*'` + regexp.QuoteMeta(name) + `'\s*\)`)
		used := false
		for _, f := range files {
			used = used || read.MatchString(f.text)
		}
		if !used {
			rep.add(Finding{ID: UnusedParam, Severity: SeverityWarning, File: path.Join(origin, "pipeline.toml"),
				Message: fmt.Sprintf("param %s is declared but no step reads it with getvariable('%s'): it changes the job key without changing rows", name, name),
				Fix:     fmt.Sprintf("read it with getvariable('%s') or remove it from pipeline.toml", name)})
		}
	}
	// A declared outcomes table that no step writes: every run would fail
	// its balance check (the stored rows are what is counted).
	if t := j.Pipeline.OutcomesTable; t != "" && !j.IsModel() {
		stores := regexp.MustCompile(`(?i)\b(INSERT|MERGE)\s+INTO\s+` + regexp.QuoteMeta(sqltext.QuoteIdent(j.Table+t)))
		stored := false
		for _, f := range files[:len(files)-1] {
			stored = stored || stores.MatchString(f.text)
		}
		if !stored {
			rep.add(Finding{ID: OutcomesNotStored, Severity: SeverityError, File: path.Join(origin, "pipeline.toml"),
				Message: fmt.Sprintf("outcomes_table %q is declared but no step stores rows in %s: idem counts the stored rows, so every run would fail its balance check", t, j.Table+t),
				Fix:     fmt.Sprintf("insert every input row's outcome into {{table:%s}} in the commit step, or remove outcomes_table", t)})
		}
	}
	if !j.IsModel() {
		l.contract(origin, files[:len(files)-1])
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.ID < b.ID
	})
	return rep, nil
}

func (r *Report) add(f Finding) {
	r.Findings = append(r.Findings, f)
	if f.Severity == SeverityError {
		r.Errors++
	} else {
		r.Warnings++
	}
}

// lintPath is p relative to the working directory when it lies below it,
// as findings name files.
func lintPath(p string) string {
	if cwd, err := os.Getwd(); err == nil && filepath.IsAbs(p) {
		if rel, err := filepath.Rel(cwd, p); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
	}
	return p
}

type lintFile struct {
	name, text string
	step       bool // a step or the model, read in order (seal.SealedText.Step)
	macro      bool // a macro the job calls (seal.SealedText.Macro)
}

type linter struct {
	ctx  context.Context
	db   *sql.DB
	j    *job.Job
	rep  *Report
	seal *seal.Seal
	// parsed holds each query's parse (parse).
	parsed map[string]parsedQuery
}

// madeReproducible says what idem does about a construct whose result
// depends on the order rows arrive in.
const madeReproducible = "idem makes it reproducible (steps run on one thread; upstream rows arrive ORDER BY ALL, a file's rows in file order), but the rows it picks follow that order, not a rule of yours"

// orderSensitiveAggregates give a result that depends on the order of
// their input rows unless they have their own ORDER BY.
var orderSensitiveAggregates = map[string]bool{
	"string_agg": true, "group_concat": true, "listagg": true, "list": true, "array_agg": true,
	"first": true, "last": true, "arbitrary": true, "histogram": true,
}

// orderSensitiveWindows give a result that depends on the order among
// rows that tie on the window's ORDER BY.
var orderSensitiveWindows = map[string]bool{
	"WINDOW_ROW_NUMBER": true, "WINDOW_NTILE": true, "WINDOW_LEAD": true, "WINDOW_LAG": true,
	"WINDOW_FIRST_VALUE": true, "WINDOW_LAST_VALUE": true, "WINDOW_NTH_VALUE": true,
}

func (l *linter) file(f lintFile) error {
	// What the run refuses: volatile functions (L003), reads and writes
	// outside the job (seal.Seal).
	funcs, err := run.EngineFunctions(l.ctx, l.db)
	if err != nil {
		return err
	}
	vs, unknown, err := l.seal.Check(seal.SealedText{File: f.name, SQL: f.text, Step: f.step, Macro: f.macro}, seal.Parser{Parse: l.parse, Count: run.CountStatements, Funcs: funcs})
	if err != nil {
		return err
	}
	// A name that is none of the job's, as the seal binds it (CTEs in
	// scope, TEMP relations made and not dropped before the statement):
	// lint has no database to look it up in, so every such name is a read
	// of a table outside the job key, as run finds it in the database.
	for _, n := range unknown {
		l.rep.add(Finding{ID: UndeclaredRead, Severity: SeverityError, File: f.name, Line: n.Line,
			Message: fmt.Sprintf("%s reads table %s, which is not a declared upstream: its rows are outside the job key, so a change to them would not rerun the job (skipped, stale rows)", path.Base(f.name), n.Written),
			Fix:     fmt.Sprintf("declare it in [input] upstream and read it as {{upstream:%s}}", n.Name)})
	}
	for _, v := range vs {
		id := Sealed
		if v.Volatile {
			id = Nondeterministic
		}
		l.rep.add(Finding{ID: id, Severity: SeverityError, File: f.name, Line: v.Line, Message: v.Message, Fix: v.Fix})
	}
	masked := sqltext.MaskSQL(f.text)
	spans, err := sqltext.Statements(f.text, run.CountStatements)
	if err != nil {
		return nil // refused above (a *sqltext.SplitError): its statements are not what idem reads
	}
	for _, st := range spans {
		text := f.text[st.Start:st.End]
		mtext := masked[st.Start:st.End]
		line := func(off int) int { return 1 + strings.Count(f.text[:st.Start+off], "\n") }
		first := len(mtext) - len(strings.TrimLeft(mtext, " \t\r\n"))
		queries, err := sqltext.StatementQueries(text, mtext, l.parse)
		if err != nil {
			return err
		}
		for _, q := range queries {
			l.query(f.name, func(loc int) int { return line(q.Start + loc) }, q.Node)
		}
		// Order that reaches output.
		var outer map[string]any
		if len(queries) > 0 {
			outer = queries[0].Node
		}
		switch {
		case copyStatement.MatchString(mtext):
			if outer == nil || !hasOrderBy(outer) {
				l.rep.add(Finding{ID: UnorderedOutput, Severity: SeverityError, File: f.name, Line: line(first),
					Message: "COPY writes rows in whatever order the query yields: two runs can write different bytes",
					Fix:     "COPY (SELECT ... ORDER BY <key columns>) TO ..."})
			}
		case insertStatement.MatchString(mtext) && outer != nil && !hasOrderBy(outer):
			l.rep.add(Finding{ID: UnorderedOutput, Severity: SeverityWarning, File: f.name, Line: line(first),
				Message: "INSERT ... SELECT without ORDER BY: the rows' order in the table (and in anything that reads it without sorting) can change between runs",
				Fix:     "end the SELECT with ORDER BY <key columns> (or _row for outcomes)"})
		}
	}
	return nil
}

// parse parses a query once: the seal's checks and lint's own read the
// same queries.
func (l *linter) parse(q string) (map[string]any, bool, error) {
	if p, ok := l.parsed[q]; ok {
		return p.node, p.ok, nil
	}
	node, ok, err := run.ParseQuery(l.ctx, l.db, q)
	if err != nil {
		return nil, false, fmt.Errorf("lint: %w", err)
	}
	l.parsed[q] = parsedQuery{node, ok}
	return node, ok, nil
}

type parsedQuery struct {
	node map[string]any
	ok   bool
}

func hasOrderBy(node map[string]any) bool {
	mods, _ := node["modifiers"].([]any)
	for _, m := range mods {
		if mm, ok := m.(map[string]any); ok && mm["type"] == "ORDER_MODIFIER" {
			return true
		}
	}
	return false
}

// query checks one parsed query's window functions, aggregates and
// LIMITs.
func (l *linter) query(file string, lineAt func(int) int, node map[string]any) {
	// EXISTS (SELECT ... LIMIT 1) asks whether any row exists: which row
	// comes first does not matter there.
	exists := map[uintptr]bool{}
	sqltext.WalkJSON(node, func(m map[string]any) {
		if t, _ := m["subquery_type"].(string); m["class"] == "SUBQUERY" && (t == "EXISTS" || t == "NOT_EXISTS") {
			if sq, ok := m["subquery"].(map[string]any); ok {
				if n, ok := sq["node"].(map[string]any); ok {
					exists[reflect.ValueOf(n).Pointer()] = true
				}
			}
		}
	})
	sqltext.WalkJSON(node, func(m map[string]any) {
		line := lineAt(seal.QueryLocation(m))
		if mods, ok := m["modifiers"].([]any); ok && !exists[reflect.ValueOf(m).Pointer()] {
			l.limit(file, lineAt, mods)
		}
		switch m["class"] {
		case "WINDOW":
			typ, _ := m["type"].(string)
			name, _ := m["function_name"].(string)
			partitions, _ := m["partitions"].([]any)
			orders, _ := m["orders"].([]any)
			sensitive := orderSensitiveWindows[typ]
			argOrders, _ := m["arg_orders"].([]any)
			if typ == "WINDOW_AGGREGATE" && orderSensitiveAggregates[strings.ToLower(name)] && len(orders) == 0 && len(argOrders) == 0 {
				l.rep.add(Finding{ID: UnorderedOutput, Severity: SeverityWarning, File: file, Line: line,
					Message: fmt.Sprintf("%s() OVER (...) without ORDER BY collects values in the order rows arrive: "+madeReproducible, name),
					Fix:     fmt.Sprintf("%s(x ORDER BY <unique columns>) OVER (...)", name)})
				return
			}
			if typ == "WINDOW_AGGREGATE" && len(orders) > 0 {
				// A ROWS frame splits peers; the default RANGE frame does not.
				start, _ := m["start"].(string)
				end, _ := m["end"].(string)
				sensitive = strings.HasSuffix(start, "_ROWS") || strings.HasSuffix(end, "_ROWS")
			}
			if !sensitive {
				return
			}
			if typ == "WINDOW_ROW_NUMBER" && len(partitions) == 0 && len(orders) == 0 {
				return // row_number() OVER (): the input order, by convention
			}
			inPartition := map[string]bool{}
			for _, p := range partitions {
				if c := columnName(p); c != "" {
					inPartition[c] = true
				}
			}
			ordered := map[string]bool{}
			for _, o := range orders {
				if om, ok := o.(map[string]any); ok {
					if c := columnName(om["expression"]); c != "" {
						ordered[c] = true
					}
				}
			}
			var need []string
			for _, k := range l.j.Pipeline.Key {
				if !inPartition[strings.ToLower(k)] {
					need = append(need, strings.ToLower(k))
				}
			}
			total := ordered["_row"] || (len(need) > 0 && !slices.ContainsFunc(need, func(k string) bool { return !ordered[k] }))
			if total {
				return
			}
			keys := strings.Join(l.j.Pipeline.Key, ", ")
			if keys == "" {
				keys = "the key columns"
			}
			l.rep.add(Finding{ID: WindowOrder, Severity: SeverityWarning, File: file, Line: line,
				Message: fmt.Sprintf("%s() OVER (...) depends on the order of rows that tie on its ORDER BY, and that ORDER BY is not total over the partition: ties are broken by the order rows arrive in; "+madeReproducible, name),
				Fix:     fmt.Sprintf("end the ORDER BY with the columns that make a row unique (%s, or _row), or use rank()/dense_rank(), which give ties one value", keys)})
		case "FUNCTION":
			name, _ := m["function_name"].(string)
			if !orderSensitiveAggregates[strings.ToLower(name)] {
				return
			}
			ob, _ := m["order_bys"].(map[string]any)
			orders, _ := ob["orders"].([]any)
			if len(orders) > 0 {
				return
			}
			l.rep.add(Finding{ID: UnorderedOutput, Severity: SeverityWarning, File: file, Line: line,
				Message: fmt.Sprintf("%s() without ORDER BY collects values in the order rows arrive: "+madeReproducible, name),
				Fix:     fmt.Sprintf("%s(x ORDER BY <unique columns>)", name)})
		}
	})
}

// limit checks a query's LIMIT or OFFSET: which rows it keeps depends on
// the order rows arrive in unless an ORDER BY in the same query is total
// (ends on the key columns or _row).
func (l *linter) limit(file string, lineAt func(int) int, mods []any) {
	var lim map[string]any
	var orders []any
	for _, m := range mods {
		mm, _ := m.(map[string]any)
		switch mm["type"] {
		case "LIMIT_MODIFIER", "LIMIT_PERCENT_MODIFIER":
			lim = mm
		case "ORDER_MODIFIER":
			orders, _ = mm["orders"].([]any)
		}
	}
	if lim == nil {
		return
	}
	at := 0
	for _, k := range []string{"limit", "offset"} {
		e, _ := lim[k].(map[string]any)
		if e == nil {
			continue
		}
		if v, ok := sqltext.ConstantText(e); k == "limit" && ok && v == "0" && lim["offset"] == nil {
			return // LIMIT 0 keeps no row
		}
		if loc, ok := e["query_location"].(float64); ok && loc >= 0 && loc < 1<<40 && at == 0 {
			at = int(loc)
		}
	}
	ordered := map[string]bool{}
	for _, o := range orders {
		if om, ok := o.(map[string]any); ok {
			if c := columnName(om["expression"]); c != "" {
				ordered[c] = true
			}
		}
	}
	key := l.j.Pipeline.Key
	total := ordered["_row"] || (len(key) > 0 && !slices.ContainsFunc(key, func(k string) bool { return !ordered[strings.ToLower(k)] }))
	if total {
		return
	}
	keys := strings.Join(key, ", ")
	if keys == "" {
		keys = "the key columns"
	}
	msg := "LIMIT/OFFSET without ORDER BY keeps whichever rows arrive first: " + madeReproducible
	if len(orders) > 0 {
		msg = "LIMIT/OFFSET with an ORDER BY that is not total keeps whichever of the rows that tie on it arrive first: " + madeReproducible
	}
	l.rep.add(Finding{ID: LimitOrder, Severity: SeverityWarning, File: file, Line: lineAt(at), Message: msg,
		Fix: fmt.Sprintf("ORDER BY columns that make a row unique (%s, or _row) before the LIMIT, or rank with row_number() OVER (PARTITION BY ... ORDER BY <total order>)", keys)})
}

// columnName is the lower-case column name of a plain column reference
// (the last part of a qualified name), or "".
func columnName(v any) string {
	m, ok := v.(map[string]any)
	if !ok || m["class"] != "COLUMN_REF" {
		return ""
	}
	names, _ := m["column_names"].([]any)
	if len(names) == 0 {
		return ""
	}
	s, _ := names[len(names)-1].(string)
	return strings.ToLower(s)
}

var (
	copyStatement   = regexp.MustCompile(`(?is)^\s*COPY\b`)
	insertStatement = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\b`)
)

// lintStream checks a job reading a stream: its pipeline needs a key
// (STREAM-001), and a max_wait under 100 ms polls the source nearly
// without pause while following (STREAM-002).
func lintStream(j *job.Job, data []byte, rep *Report) {
	if j.Pipeline.Mode == pipeline.ModeApply && len(j.Pipeline.Key) == 0 {
		rep.add(streamNoKey(j.File, data, j.Input.Stream.Kind))
	}
	if w := j.Input.Stream.MaxWait; w < 100*time.Millisecond {
		rep.add(Finding{ID: StreamFastPoll, Severity: SeverityWarning, File: j.File, Line: jobfs.KeyLine(data, "input", "max_wait"),
			Message: fmt.Sprintf("max_wait = %q: run --follow closes a batch every %s, an always-on cost (a transaction and a snapshot per batch) even when few records come", w, w),
			Fix:     `raise max_wait to 100ms or more (default "2s")`})
	}
}

func streamNoKey(file string, data []byte, kind string) Finding {
	return Finding{ID: StreamNoKey, Severity: SeverityError, File: file, Line: jobfs.KeyLine(data, "input", "kind"),
		Message: fmt.Sprintf("the job applies a %s stream without key columns: a source that replays records (a reset consumer, a reconnect) would double rows", kind),
		Fix:     `use a pipeline with key columns, or declare key = ["..."] in [target]`}
}
