package seal

import (
	"fmt"
	"regexp"
	"strings"
)

// StmtKind is what one statement of a step does.
type StmtKind int

// The statement kinds a step may hold; StmtOther is every other statement
// (COPY, ATTACH, SET, PRAGMA, ...), which a step may not hold.
const (
	StmtQuery StmtKind = iota
	StmtCreate
	StmtInsert
	StmtUpdate
	StmtDelete
	StmtMerge
	StmtTruncate
	StmtDrop
	StmtAlter
	StmtVariable // SET VARIABLE, RESET VARIABLE
	StmtOther
)

// Statement is one statement as its leading keywords say: its kind, what
// it creates, drops or alters (TABLE, VIEW, MACRO, INDEX ...), whether it
// is TEMP, and the name it writes, as written ([catalog.][schema.]name).
type Statement struct {
	Kind    StmtKind
	Keyword string // the statement's first keywords, upper case: COPY, CREATE SEQUENCE
	Object  string // TABLE, VIEW, MACRO, FUNCTION, INDEX, SEQUENCE, SCHEMA ...
	Temp    bool
	Replace bool     // CREATE OR REPLACE
	Target  []string // the name written, by parts
	On      []string // CREATE INDEX: the table it indexes
	At      int      // offset of the statement's first keyword
}

type token struct {
	word  string // lower case keyword or identifier; "" for punctuation
	punct byte
	start int
}

// sqlTokens splits one statement into words (identifiers, keywords,
// quoted identifiers unquoted) and punctuation, skipping comments and
// string literals (masked is text after MaskSQL).
func sqlTokens(text, masked string) []token {
	var out []token
	for i := 0; i < len(masked); {
		c := masked[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '"':
			j := strings.IndexByte(masked[i+1:], '"')
			end := len(masked)
			if j >= 0 {
				end = i + 1 + j
			}
			out = append(out, token{word: strings.ReplaceAll(text[i+1:end], `""`, `"`), start: i})
			i = end + 1
		case c == '\'':
			j := strings.IndexByte(masked[i+1:], '\'')
			end := len(masked)
			if j >= 0 {
				end = i + 1 + j
			}
			out = append(out, token{punct: '\'', start: i})
			i = end + 1
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80:
			j := i
			for j < len(masked) && (masked[j] == '_' || masked[j] == '$' || masked[j] >= 'a' && masked[j] <= 'z' ||
				masked[j] >= 'A' && masked[j] <= 'Z' || masked[j] >= '0' && masked[j] <= '9' || masked[j] >= 0x80) {
				j++
			}
			out = append(out, token{word: strings.ToLower(masked[i:j]), start: i})
			i = j
		default:
			out = append(out, token{punct: c, start: i})
			i++
		}
	}
	return out
}

// ClassifyStatement reads one statement's kind and target from its
// leading keywords (text, and masked its MaskSQL twin). A WITH clause is
// skipped to the statement it prefixes.
func ClassifyStatement(text, masked string) Statement {
	toks := sqlTokens(text, masked)
	st := Statement{Kind: StmtOther}
	if len(toks) == 0 {
		st.Kind = StmtQuery
		return st
	}
	st.At = toks[0].start
	p := &tokParser{toks: toks}
	if p.peek("with") {
		p.skipWith()
	}
	first := p.next()
	if first.punct == '(' {
		st.Kind = StmtQuery
		return st
	}
	st.Keyword = strings.ToUpper(first.word)
	switch first.word {
	case "select", "from", "values":
		st.Kind = StmtQuery
	case "insert":
		st.Kind = StmtInsert
		if p.accept("or") {
			p.next() // REPLACE | IGNORE
		}
		p.accept("into")
		st.Target = p.name()
	case "update":
		st.Kind = StmtUpdate
		st.Target = p.name()
	case "delete":
		st.Kind = StmtDelete
		p.accept("from")
		st.Target = p.name()
	case "merge":
		st.Kind = StmtMerge
		p.accept("into")
		st.Target = p.name()
	case "truncate":
		st.Kind = StmtTruncate
		p.accept("table")
		st.Target = p.name()
	case "create":
		st.Kind = StmtCreate
		if p.accept("or") {
			st.Replace = p.accept("replace")
		}
		if p.accept("temp") || p.accept("temporary") {
			st.Temp = true
		}
		p.accept("unique")
		st.Object = strings.ToUpper(p.next().word)
		st.Keyword += " " + st.Object
		if p.accept("if") {
			p.accept("not")
			p.accept("exists")
		}
		if st.Object == "INDEX" {
			if !p.peek("on") {
				st.Target = p.name()
			}
			p.accept("on")
			st.On = p.name()
		} else {
			st.Target = p.name()
		}
	case "drop", "alter":
		st.Kind = StmtDrop
		if first.word == "alter" {
			st.Kind = StmtAlter
		}
		st.Object = strings.ToUpper(p.next().word)
		st.Keyword += " " + st.Object
		if p.accept("if") {
			p.accept("exists")
		}
		st.Target = p.name()
	case "set", "reset":
		if p.accept("variable") {
			st.Kind = StmtVariable
			st.Target = p.name()
		}
	}
	return st
}

type tokParser struct {
	toks []token
	i    int
}

func (p *tokParser) peek(word string) bool {
	return p.i < len(p.toks) && p.toks[p.i].word == word && p.toks[p.i].punct == 0
}

func (p *tokParser) accept(word string) bool {
	if p.peek(word) {
		p.i++
		return true
	}
	return false
}

func (p *tokParser) next() token {
	if p.i >= len(p.toks) {
		return token{}
	}
	p.i++
	return p.toks[p.i-1]
}

// name reads [catalog.][schema.]name.
func (p *tokParser) name() []string {
	var parts []string
	for p.i < len(p.toks) && p.toks[p.i].punct == 0 {
		parts = append(parts, p.toks[p.i].word)
		p.i++
		if p.i < len(p.toks) && p.toks[p.i].punct == '.' {
			p.i++
			continue
		}
		break
	}
	return parts
}

// skipWith skips WITH [RECURSIVE] name [(cols)] AS [NOT] [MATERIALIZED]
// (query), ... up to the statement the clause prefixes.
func (p *tokParser) skipWith() {
	p.accept("with")
	p.accept("recursive")
	for p.i < len(p.toks) {
		p.name()
		if p.i < len(p.toks) && p.toks[p.i].punct == '(' && !p.peek("as") {
			p.skipParens()
		}
		p.accept("as")
		p.accept("not")
		p.accept("materialized")
		if p.i < len(p.toks) && p.toks[p.i].punct == '(' {
			p.skipParens()
		}
		if p.i < len(p.toks) && p.toks[p.i].punct == ',' {
			p.i++
			continue
		}
		return
	}
}

func (p *tokParser) skipParens() {
	depth := 0
	for ; p.i < len(p.toks); p.i++ {
		switch p.toks[p.i].punct {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				p.i++
				return
			}
		}
	}
}

// otherStatements say why a step may not hold a statement of another kind.
var otherStatements = map[string]string{
	"COPY":       "writes a file outside the database, which no snapshot holds",
	"EXPORT":     "writes files outside the database, which no snapshot holds",
	"IMPORT":     "loads rows from files outside the job's declared inputs",
	"ATTACH":     "opens another database, outside the job's declared relations",
	"DETACH":     "closes a database idem attached for the run",
	"USE":        "changes which database and schema plain names bind to",
	"SET":        "changes a setting idem fixes for the run (threads, memory, time zone)",
	"RESET":      "changes a setting idem fixes for the run (threads, memory, time zone)",
	"PRAGMA":     "reads or changes the database's settings and catalog",
	"CALL":       "calls a table function outside the job's declared relations",
	"CHECKPOINT": "writes the database file in the middle of the run's transaction",
	"VACUUM":     "rewrites tables the job does not own",
	"ANALYZE":    "rewrites statistics of tables the job does not own",
	"INSTALL":    "loads code from outside the job",
	"LOAD":       "loads code from outside the job",
	"EXPLAIN":    "inspects, or with ANALYZE runs, another statement: a step holds the statement itself",
	"DESCRIBE":   "reads the database's catalog, which holds other jobs' tables",
	"SHOW":       "reads the database's catalog, which holds other jobs' tables",
	"SUMMARIZE":  "computes statistics whose result the step would not keep",
	"TABLE":      "TABLE name is a query whose result the step would not keep (write SELECT * FROM name where a query is meant)",
	"PIVOT":      "is a query whose result the step would not keep (CREATE TEMP TABLE name AS PIVOT ...)",
	"UNPIVOT":    "is a query whose result the step would not keep (CREATE TEMP TABLE name AS UNPIVOT ...)",
	"BEGIN":      "idem owns the run's transaction",
	"START":      "idem owns the run's transaction",
	"COMMIT":     "idem owns the run's transaction",
	"END":        "idem owns the run's transaction",
	"ROLLBACK":   "idem owns the run's transaction",
	"ABORT":      "idem owns the run's transaction",
}

var idemVariable = regexp.MustCompile(`^idem_`)

// TrackTemp keeps temp, the temporary relations made so far, up to date
// after statement st: a CREATE TEMP adds its name, a DROP of a plain or
// temp. name takes it away (the name then binds to the database's table
// of that name, if any, as DuckDB binds it).
func TrackTemp(st Statement, temp map[string]bool) {
	if len(st.Target) == 0 {
		return
	}
	name := strings.ToLower(st.Target[len(st.Target)-1])
	switch {
	case st.Kind == StmtCreate && st.Temp:
		temp[name] = true
	case st.Kind == StmtDrop && (st.Object == "TABLE" || st.Object == "VIEW") &&
		(len(st.Target) == 1 || strings.EqualFold(st.Target[0], "temp")):
		delete(temp, name)
	}
}

// CheckWrite judges one statement's kind and target (checkWrite), for the
// run, which judges each statement again as it runs it. temp are the
// temporary relations made so far.
func (s *Seal) CheckWrite(st Statement, temp map[string]bool) (Violation, bool) {
	return s.checkWrite(st, temp)
}

// checkWrite judges one statement's kind and target. temp are the
// temporary relations made so far (idem's and the steps').
func (s *Seal) checkWrite(st Statement, temp map[string]bool) (Violation, bool) {
	written := strings.Join(st.Target, ".")
	refuse := func(construct, msg, fix string) (Violation, bool) {
		return Violation{Construct: construct, Message: msg, Fix: fix}, false
	}
	const ownFix = "write only the job's target ({{table}}), its companions ({{table:_suffix}}) and TEMP relations"
	switch st.Kind {
	case StmtQuery:
		return Violation{}, true
	case StmtVariable:
		if len(st.Target) == 1 && idemVariable.MatchString(st.Target[0]) {
			return refuse("SET VARIABLE "+written, fmt.Sprintf("variable %s is idem's: the run binds it", written), "use a variable name that does not start with idem_")
		}
		return Violation{}, true
	case StmtOther:
		kw := st.Keyword
		if kw == "" {
			kw = "this statement"
		}
		why, ok := otherStatements[kw]
		if !ok {
			why = "is not a statement a step may hold (queries, CREATE TEMP, and writes to the job's own tables)"
		}
		return refuse(kw, kw+" "+why, "a step may hold queries, CREATE TEMP relations and macros, and INSERT, UPDATE, DELETE, MERGE, CREATE, ALTER or DROP of the job's own tables")
	case StmtCreate:
		switch st.Object {
		case "TABLE", "VIEW":
		case "MACRO", "FUNCTION":
			if st.Temp {
				return Violation{}, true
			}
			return refuse(st.Keyword+" "+written, fmt.Sprintf("%s %s would outlive the run in the database, outside the job's tables", st.Keyword, written), "CREATE TEMP "+st.Object)
		case "INDEX":
			if s.ownTarget(st.On, temp) {
				return Violation{}, true
			}
			on := strings.Join(st.On, ".")
			return refuse(st.Keyword+" ON "+on, fmt.Sprintf("CREATE INDEX writes table %s, which is not the job's", on), ownFix)
		default:
			return refuse(st.Keyword, fmt.Sprintf("%s %s is not an object a step may create", st.Keyword, written), ownFix)
		}
		if st.Temp {
			if len(st.Target) > 1 && !(len(st.Target) == 2 && strings.EqualFold(st.Target[0], "temp")) &&
				!(len(st.Target) == 3 && strings.EqualFold(st.Target[0], "temp")) {
				return refuse(st.Keyword+" "+written, fmt.Sprintf("CREATE TEMP %s names schema %s", written, st.Target[0]), "name a TEMP relation without a schema")
			}
			return Violation{}, true
		}
	case StmtDrop, StmtAlter:
		switch st.Object {
		case "TABLE", "VIEW", "MACRO", "FUNCTION", "INDEX":
		default:
			return refuse(st.Keyword, fmt.Sprintf("%s %s is not an object a step may change", st.Keyword, written), ownFix)
		}
		if st.Object == "INDEX" || ((st.Object == "MACRO" || st.Object == "FUNCTION") && len(st.Target) == 1 && temp[strings.ToLower(st.Target[0])]) {
			if st.Object == "INDEX" && len(st.Target) > 1 {
				return refuse(st.Keyword+" "+written, fmt.Sprintf("%s %s names another schema", st.Keyword, written), ownFix)
			}
			return Violation{}, true
		}
	}
	if s.ownTarget(st.Target, temp) {
		return Violation{}, true
	}
	verb := map[StmtKind]string{StmtCreate: st.Keyword, StmtInsert: "INSERT INTO", StmtUpdate: "UPDATE", StmtDelete: "DELETE FROM",
		StmtMerge: "MERGE INTO", StmtTruncate: "TRUNCATE", StmtDrop: st.Keyword, StmtAlter: st.Keyword}[st.Kind]
	if written == "" {
		return refuse(verb, verb+" names no table idem can read", ownFix)
	}
	return refuse(verb+" "+written, fmt.Sprintf("%s %s writes a table that is not the job's", verb, written), ownFix)
}

// ownTarget reports whether a name as written is the job's own table
// (main schema) or a temporary relation.
func (s *Seal) ownTarget(parts []string, temp map[string]bool) bool {
	if len(parts) == 0 {
		return false
	}
	name := strings.ToLower(parts[len(parts)-1])
	quals := parts[:len(parts)-1]
	switch len(quals) {
	case 0:
		return s.Own[name] || temp[name]
	case 1:
		if strings.EqualFold(quals[0], "temp") {
			return true
		}
		return (strings.EqualFold(quals[0], "main") || strings.EqualFold(quals[0], StoreCatalog)) && s.Own[name]
	case 2:
		if strings.EqualFold(quals[0], "temp") {
			return true
		}
		return strings.EqualFold(quals[0], StoreCatalog) && strings.EqualFold(quals[1], "main") && s.Own[name]
	}
	return false
}
