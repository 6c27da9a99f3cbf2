package job

import (
	"regexp"
	"strings"
)

// Nondeterministic names functions whose result is not a function of their
// arguments: the same input would give other rows.
var Nondeterministic = map[string]bool{
	"now": true, "current_timestamp": true, "get_current_timestamp": true, "transaction_timestamp": true,
	"statement_timestamp": true, "current_date": true, "current_time": true, "today": true,
	"get_current_time": true, "localtime": true, "localtimestamp": true, "random": true, "setseed": true,
	"uuid": true, "gen_random_uuid": true, "uuidv4": true, "uuidv7": true, "current_query": true,
	"txid_current": true, "nextval": true, "currval": true,
}

// NondeterministicRefs are the special names DuckDB parses as column
// references (current_timestamp without parentheses).
var NondeterministicRefs = map[string]bool{
	"current_timestamp": true, "current_date": true, "current_time": true,
	"localtime": true, "localtimestamp": true,
}

var (
	volatileCall = regexp.MustCompile(`(?i)\b(` + strings.Join(SortedKeys(Nondeterministic), "|") + `)\s*\(`)
	volatileWord = regexp.MustCompile(`(?i)\b(` + strings.Join(SortedKeys(NondeterministicRefs), "|") + `)\b`)
)
