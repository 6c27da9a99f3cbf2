package docs

import (
	"regexp"
	"strings"

	"github.com/idem-dev/idem/internal/sqltext"
)

// The descriptions of a job's columns come from the job file's [columns]
// table (job.ColumnDocs) and, for a model, from the comment that ends a
// line of its SELECT list:
//
//	SELECT pickup_day,                -- the day the trip began
//	       count(*) AS trips,         -- clean trips that day and zone
//
// The job file's description of a column wins over the model's comment.

// selectItemName is the name a SELECT list item gives its column: the
// alias after AS, else the last (possibly qualified or quoted) identifier.
var selectItemName = regexp.MustCompile(`(?i)(?:^|[\s.,(])("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_]*)$`)

// modelColumnDocs reads the trailing -- comments of a model's SELECT
// lists: the lines from a line that begins with SELECT up to the line of
// its FROM (outside parentheses), each with code before the comment that
// ends in a column's name. A later SELECT list (the model's own, after its
// WITH) wins over an earlier one. Quotes and comments are read as the job
// package's lexer reads them (sqltext.MaskSQL): a -- inside a string, a
// dollar-quoted string or an E'...' string is no comment, and a FROM or a --
// inside a /* */ comment is neither.
func modelColumnDocs(sql string) map[string]string {
	sql = strings.ReplaceAll(sql, "\r\n", "\n")
	masked := sqltext.MaskSQL(sql) // strings and comments blanked: the code
	// code is sql with its comments blanked: the items as written, their
	// quoted names kept; lineComment the -- comments, by where they begin.
	code := []byte(sql)
	lineComment := map[int]int{}
	for _, c := range sqltext.SQLComments(sql) {
		if strings.HasPrefix(sql[c.Start:], "--") {
			lineComment[c.Start] = c.End
		}
		for k := c.Start; k < c.End; k++ {
			if code[k] != '\n' {
				code[k] = ' '
			}
		}
	}
	out := map[string]string{}
	inList := false
	depth := 0 // of parentheses, across the lines of a SELECT list
	for from := 0; from < len(sql); {
		to := strings.IndexByte(sql[from:], '\n')
		if to < 0 {
			to = len(sql)
		} else {
			to += from
		}
		line, next := from, to+1
		from = next
		lead := len(masked[line:to]) - len(strings.TrimLeft(masked[line:to], " \t"))
		start := line + lead
		if !inList {
			if !hasWordPrefix(masked[start:to], "select") {
				continue
			}
			inList, depth = true, 0
			start += len("select")
		}
		at := to // where the line's -- comment begins
		for k := start; k < to; k++ {
			if _, ok := lineComment[k]; ok {
				at = k
				break
			}
		}
		if listEnds(masked[start:at], &depth) {
			inList = false
			continue
		}
		if at == to {
			continue
		}
		comment := strings.TrimSpace(sql[at+2 : to])
		item := strings.TrimSpace(string(code[start:at]))
		if comment == "" {
			continue
		}
		m := selectItemName.FindStringSubmatch(strings.TrimSpace(strings.TrimSuffix(item, ",")))
		if m == nil {
			continue
		}
		name := m[1]
		if strings.HasPrefix(name, `"`) {
			name = strings.ReplaceAll(name[1:len(name)-1], `""`, `"`)
		}
		out[name] = comment
	}
	return out
}

// hasWordPrefix says whether masked begins with the keyword word (any
// case), not a longer name.
func hasWordPrefix(masked, word string) bool {
	return len(masked) >= len(word) && strings.EqualFold(masked[:len(word)], word) &&
		(len(masked) == len(word) || !isWordByte(masked[len(word)]))
}

// listEnds reads masked code of a line of a SELECT list (strings and
// comments blanked by sqltext.MaskSQL): whether it holds the keyword FROM
// outside parentheses; depth carries the parentheses left open by earlier
// lines.
func listEnds(masked string, depth *int) bool {
	from := false
	for i := 0; i < len(masked); i++ {
		switch c := masked[i]; {
		case c == '(':
			*depth++
		case c == ')':
			*depth--
		case *depth == 0 && (i == 0 || !isWordByte(masked[i-1])) && hasWordPrefix(masked[i:], "from"):
			from = true
		}
	}
	return from
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
