package docs

import (
	"regexp"
	"strings"
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
// WITH) wins over an earlier one.
func modelColumnDocs(sql string) map[string]string {
	out := map[string]string{}
	inList := false
	depth := 0 // of parentheses, across the lines of a SELECT list
	for _, line := range strings.Split(strings.ReplaceAll(sql, "\r\n", "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		if !inList {
			if !strings.HasPrefix(strings.ToUpper(trimmed), "SELECT") {
				continue
			}
			inList, depth = true, 0
			trimmed = trimmed[len("SELECT"):]
		}
		at, from := scanLine(trimmed, &depth)
		if from {
			inList = false
			continue
		}
		comment := strings.TrimSpace(strings.TrimPrefix(trimmed[at:], "--"))
		trimmed = strings.TrimSpace(trimmed[:at])
		if comment == "" {
			continue
		}
		m := selectItemName.FindStringSubmatch(strings.TrimSpace(strings.TrimSuffix(trimmed, ",")))
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

// scanLine reads a line of SQL outside its quotes: where its -- comment
// begins (len(line) when it has none), and whether the code before it holds
// the keyword FROM outside parentheses; depth carries the parentheses left
// open by earlier lines.
func scanLine(line string, depth *int) (comment int, from bool) {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(':
			*depth++
		case c == ')':
			*depth--
		case c == '-' && strings.HasPrefix(line[i:], "--"):
			return i, from
		case *depth == 0 && len(line)-i >= 4 && strings.EqualFold(line[i:i+4], "from") &&
			(i == 0 || !isWordByte(line[i-1])) && (len(line)-i == 4 || !isWordByte(line[i+4])):
			from = true
		}
	}
	return len(line), from
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
