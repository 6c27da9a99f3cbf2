package sqltext

import (
	"regexp"
	"strings"
)

// MaskSQL returns text with comments and the insides of string literals
// and quoted identifiers replaced by spaces (newlines kept), so that
// offsets stay the same and keywords inside them are not seen. It reads
// quotes and comments as DuckDB's lexer does: ” inside a string, E'...'
// strings with backslash escapes, dollar-quoted strings ($$...$$,
// $tag$...$tag$), nested /* */ comments, and "" inside a quoted
// identifier. A dollar-quoted string is masked like a string literal: its
// first and last characters become ' and its inside spaces. Whatever idem
// splits on this masking is checked against DuckDB's own parser before it
// runs (Statements), so a quote read another way is refused, not run.
func MaskSQL(text string) string {
	masked, _ := maskSQL(text)
	return masked
}

// SQLComments are the comments of text as MaskSQL reads them, in order: a
// -- comment up to the end of its line (the newline not included), a
// nested /* */ comment whole.
func SQLComments(text string) []Span {
	_, comments := maskSQL(text)
	return comments
}

// maskSQL is MaskSQL, with the comments it blanked.
func maskSQL(text string) (string, []Span) {
	var comments []Span
	b := []byte(text)
	blank := func(from, to int) {
		for k := from; k < to && k < len(b); k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
	}
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '-' && i+1 < len(b) && b[i+1] == '-':
			j := i
			for j < len(b) && b[j] != '\n' {
				j++
			}
			blank(i, j)
			comments = append(comments, Span{i, j})
			i = j
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			j, depth := i+2, 1
			for j < len(b) && depth > 0 {
				switch {
				case b[j] == '/' && j+1 < len(b) && b[j+1] == '*':
					depth++
					j += 2
				case b[j] == '*' && j+1 < len(b) && b[j+1] == '/':
					depth--
					j += 2
				default:
					j++
				}
			}
			blank(i, j)
			comments = append(comments, Span{i, min(j, len(b))})
			i = j
		case c == '\'':
			j := quoteEnd(text, i, false)
			blank(i+1, j-1)
			i = j
		case c == '"':
			j := quoteEnd(text, i, false)
			blank(i+1, j-1)
			i = j
		case (c == 'e' || c == 'E') && i+1 < len(b) && b[i+1] == '\'':
			j := quoteEnd(text, i+1, true)
			blank(i+2, j-1)
			i = j
		case c == '$':
			if j, ok := dollarEnd(text, i); ok {
				blank(i, j)
				b[i] = '\''
				if j-1 > i {
					b[j-1] = '\''
				}
				i = j
				continue
			}
			i++
			for i < len(b) && isIdentCont(b[i]) { // $1, $name: a parameter
				i++
			}
		case isIdentStart(c):
			for i < len(b) && isIdentCont(b[i]) {
				i++
			}
		case c >= '0' && c <= '9':
			for i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] == '.' || b[i] == '_') {
				i++
			}
		default:
			i++
		}
	}
	return string(b), comments
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentCont(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }

// quoteEnd is the offset just past the quote that closes the one at
// text[i] (a doubled quote is one character of the inside); backslash
// escapes a character when escapes is set (E'...'). An unclosed quote
// ends at the end of text.
func quoteEnd(text string, i int, escapes bool) int {
	q := text[i]
	for j := i + 1; j < len(text); j++ {
		switch {
		case escapes && text[j] == '\\':
			j++
		case text[j] == q:
			if j+1 < len(text) && text[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(text)
}

// dollarEnd reads a dollar-quoted string at text[i] ($$...$$ or
// $tag$...$tag$, a tag an identifier without $): the offset just past its
// closing delimiter (the end of text when unclosed), or ok false when
// text[i] starts no delimiter ($1, $name).
func dollarEnd(text string, i int) (int, bool) {
	j := i + 1
	if j < len(text) && text[j] != '$' {
		if !isIdentStart(text[j]) {
			return 0, false
		}
		for j < len(text) && isIdentCont(text[j]) && text[j] != '$' {
			j++
		}
	}
	if j >= len(text) || text[j] != '$' {
		return 0, false
	}
	delim := text[i : j+1]
	end := strings.Index(text[j+1:], delim)
	if end < 0 {
		return len(text), true
	}
	return j + 1 + end + len(delim), true
}

// Span is where one statement lies in a step's text.
type Span struct{ Start, End int }

// SplitStatements splits masked SQL (see MaskSQL) at semicolons into
// non-blank statements.
func SplitStatements(masked string) []Span {
	var out []Span
	start := 0
	for i := 0; i <= len(masked); i++ {
		if i == len(masked) || masked[i] == ';' {
			if strings.TrimSpace(masked[start:i]) != "" {
				out = append(out, Span{start, i})
			}
			start = i + 1
		}
	}
	return out
}

// ClosingParen is the offset where the parenthesis level that start is in
// closes, or the end of s.
func ClosingParen(s string, start int) int {
	depth := 0
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return i
			}
		}
	}
	return len(s)
}

// ParsedQuery is one query of a statement as DuckDB's json_serialize_sql
// parsed it: its offset in the statement and the statement's node.
type ParsedQuery struct {
	Start int
	Node  map[string]any
}

// ParseFunc parses one query with json_serialize_sql. ok is false when the
// text is not one statement DuckDB can serialize; err is a failure to ask.
type ParseFunc func(query string) (node map[string]any, ok bool, err error)

var queryStart = regexp.MustCompile(`(?i)\b(SELECT|WITH|FROM)\b`)

// StatementQueries finds the queries of one statement (text, and its
// MaskSQL masked twin) that parse accepts: for each SELECT, WITH or FROM
// outside strings and comments, from there to the end of its parenthesis
// (or of the statement), outermost first. A query found inside one already
// parsed is skipped: the outer parse holds it.
func StatementQueries(text, masked string, parse ParseFunc) ([]ParsedQuery, error) {
	var out []ParsedQuery
	coveredUntil := -1
	for _, m := range queryStart.FindAllStringIndex(masked, -1) {
		if m[0] < coveredUntil {
			continue
		}
		end := ClosingParen(masked, m[0])
		node, ok, err := parse(text[m[0]:end])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, ParsedQuery{Start: m[0], Node: node})
			coveredUntil = end
		}
	}
	return out, nil
}

// QueryTexts are the first text StatementQueries gives parse for each
// statement of text, in order: the outermost query, which usually holds
// the whole statement's, so a caller that parses them all in one round
// trip before the checks seldom has another to ask for. (Parsing every
// candidate would parse each statement once per SELECT, WITH and FROM in
// it.)
func QueryTexts(text string) []string {
	masked := MaskSQL(text)
	var out []string
	for _, st := range SplitStatements(masked) {
		stmt, mstmt := text[st.Start:st.End], masked[st.Start:st.End]
		if m := queryStart.FindStringIndex(mstmt); m != nil {
			out = append(out, stmt[m[0]:ClosingParen(mstmt, m[0])])
		}
	}
	return out
}

// TextQueries is StatementQueries over every statement of text, with each
// query's offset in text.
func TextQueries(text string, parse ParseFunc) ([]ParsedQuery, error) {
	masked := MaskSQL(text)
	var out []ParsedQuery
	for _, st := range SplitStatements(masked) {
		qs, err := StatementQueries(text[st.Start:st.End], masked[st.Start:st.End], parse)
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			q.Start += st.Start
			out = append(out, q)
		}
	}
	return out, nil
}

var (
	sqlName         = `(?:"(?:[^"]|"")*"|[A-Za-z_][A-Za-z0-9_$]*)`
	createdRelation = regexp.MustCompile(`(?is)\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:(TEMP|TEMPORARY)\s+)?(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:` + sqlName + `\s*\.\s*)*(` + sqlName + `)`)
)

// CreatedRelations lists, lower case, the names of the tables and views
// text creates (CREATE [OR REPLACE] [TEMP] TABLE|VIEW name), outside
// comments and string literals.
func CreatedRelations(text string) []string { return createdRelations(text, false) }

// TempRelations is CreatedRelations of the temp tables and views only.
func TempRelations(text string) []string { return createdRelations(text, true) }

// createdRelations is CreatedRelations, of temp tables and views only when
// temp is set.
func createdRelations(text string, temp bool) []string {
	masked := MaskSQL(text)
	var out []string
	for _, m := range createdRelation.FindAllStringSubmatchIndex(text, -1) {
		if !strings.EqualFold(masked[m[0]:m[0]+6], "CREATE") || (temp && m[2] < 0) {
			continue
		}
		name := text[m[4]:m[5]]
		if strings.HasPrefix(name, `"`) {
			name = strings.ReplaceAll(name[1:len(name)-1], `""`, `"`)
		}
		out = append(out, strings.ToLower(name))
	}
	return out
}

// QuoteIdent quotes a SQL identifier.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// SQLString quotes a SQL string literal.
func SQLString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Identifier is what idem accepts as a job, table or column name. Names are
// also quoted wherever they reach SQL; the pattern keeps them readable.
var Identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
