package seal

import (
	"fmt"
	"github.com/idem-dev/idem/internal/sqltext"
	"strings"
)

// Macro is one macro of a job's macros folder that the job uses.
type Macro struct {
	Name string
	File string // the file, as messages name it: macros/NAME.sql
	// SQL is the file's text (trimmed, without its final ;): what the key
	// covers.
	SQL string
	// Create is the statement a run executes on its connection before the
	// steps: the file's CREATE with its head written CREATE OR REPLACE
	// TEMP MACRO, so the macro lives only in the run's transaction and
	// connection, never in the database.
	Create string
}

// ParseMacro reads the head of a macro file: CREATE [OR REPLACE] [TEMP]
// MACRO|FUNCTION name (. The rest (its parameters and body) is DuckDB's to
// parse, and the seal's to check.
func ParseMacro(base, file, text string) (Macro, error) {
	t := strings.TrimSpace(text)
	t = strings.TrimSpace(strings.TrimSuffix(t, ";"))
	if !sqltext.Identifier.MatchString(base) {
		return Macro{}, fmt.Errorf("macro file name %s is not a macro name (letters, digits and underscores, starting with a letter)", base+".sql")
	}
	masked := sqltext.MaskSQL(t)
	toks := sqlTokens(t, masked)
	p := &tokParser{toks: toks}
	ok := p.accept("create")
	if ok && p.accept("or") {
		ok = p.accept("replace")
	}
	if ok && !p.accept("temp") {
		p.accept("temporary")
	}
	ok = ok && (p.accept("macro") || p.accept("function"))
	var name token
	if ok && p.i < len(toks) {
		name = toks[p.i]
		p.i++
	}
	if !ok || name.word == "" || masked[name.start] == '"' || p.i >= len(toks) || toks[p.i].punct != '(' {
		return Macro{}, fmt.Errorf("a macro file holds one CREATE MACRO %s(...) AS ... (or AS TABLE SELECT ...)", base)
	}
	if name.word != strings.ToLower(base) {
		return Macro{}, fmt.Errorf("the file creates macro %s: a macro file is named for its macro (%s.sql)", t[name.start:name.start+len(name.word)], name.word)
	}
	if strings.HasPrefix(name.word, "idem") {
		return Macro{}, fmt.Errorf("macro %s: names starting with idem are reserved", base)
	}
	// Every byte after the name is the file's own; only the head is
	// idem's, and it names the macro as the file does, on the name's line
	// (a violation names the file's line).
	create := strings.Repeat("\n", strings.Count(t[:name.start], "\n")) +
		"CREATE OR REPLACE TEMP MACRO " + sqltext.QuoteIdent(name.word) + t[name.start+len(name.word):]
	return Macro{Name: name.word, File: file, SQL: t, Create: create}, nil
}

// checkMacro is the seal of a macro's text: one CREATE TEMP MACRO that
// reads no relation by name. Every name its queries read that is not one
// of its own common table expressions is refused.
func checkMacro(t SealedText, p Parser, macros map[string]bool) ([]Violation, error) {
	s := &Seal{Own: map[string]bool{}, Temp: map[string]bool{}, Upstream: map[string]bool{}, Declared: map[string]bool{}, Macros: macros, macro: true}
	vs, names, err := s.Check(t, p)
	if err != nil {
		return nil, err
	}
	spans, _ := sqltext.Statements(t.SQL, p.Count)
	if len(spans) > 1 {
		file, line := t.where(0)
		vs = append(vs, Violation{File: file, Line: line, Construct: "statements",
			Message: fmt.Sprintf("a macro file holds one CREATE MACRO statement, not %d", len(spans)),
			Fix:     "put each macro in a file of its own"})
	}
	for _, n := range names {
		vs = append(vs, Violation{File: n.File, Line: n.Line, Construct: n.Written,
			Message: fmt.Sprintf("macro reads %s: a macro reads no relation by name, so that what it reads is declared by the job that calls it", n.Written),
			Fix:     "pass the values as arguments, or read the relation in the job's SQL and call a scalar macro on its columns"})
	}
	return vs, nil
}
