package seal

import (
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
	"strings"
)

// Nondeterministic names functions whose result is not a function of their
// arguments: the same input would give other rows. DuckDB's function
// catalog says the same of most of them (Functions); this list is what
// idem knows without it, and what it adds to it.
var Nondeterministic = map[string]bool{
	"now": true, "current_timestamp": true, "get_current_timestamp": true, "transaction_timestamp": true,
	"statement_timestamp": true, "current_date": true, "current_time": true, "today": true,
	"get_current_time": true, "localtime": true, "localtimestamp": true, "random": true, "setseed": true,
	"uuid": true, "gen_random_uuid": true, "uuidv4": true, "uuidv7": true, "current_query": true,
	"txid_current": true, "nextval": true, "currval": true,
	// DuckDB's catalog calls these CONSISTENT, yet they read the clock or
	// the session.
	"current_localtime": true, "current_localtimestamp": true, "current_connection_id": true,
	"current_transaction_id": true, "current_query_id": true, "ago": true,
	"pg_conf_load_time": true, "pg_postmaster_start_time": true,
}

// NondeterministicRefs are the special names DuckDB parses as column
// references (current_timestamp without parentheses).
var NondeterministicRefs = map[string]bool{
	"current_timestamp": true, "current_date": true, "current_time": true,
	"localtime": true, "localtimestamp": true,
}

// sessionFunctions read the database's catalog, the session or the engine
// rather than the job's rows: other jobs' names, the file's path, the
// engine's version.
var sessionFunctions = map[string]bool{
	"current_database": true, "current_catalog": true, "current_schema": true, "current_schemas": true,
	"in_search_path": true, "current_user": true, "current_role": true, "session_user": true, "user": true,
	"version": true, "col_description": true, "obj_description": true, "shobj_description": true,
	"format_type": true, "database_size": true,
	"inet_client_addr": true, "inet_client_port": true, "inet_server_addr": true, "inet_server_port": true,
	"get_block_size": true, "json_execute_serialized_sql": true,
}

// catalogViews are DuckDB's views of its own catalog that a plain name
// reaches (pg_catalog and the main schema of the system catalog).
var catalogViews = map[string]bool{
	"duckdb_columns": true, "duckdb_constraints": true, "duckdb_databases": true, "duckdb_indexes": true,
	"duckdb_logs": true, "duckdb_schemas": true, "duckdb_tables": true, "duckdb_types": true, "duckdb_views": true,
	"pragma_database_list": true, "sqlite_master": true, "sqlite_schema": true, "sqlite_temp_master": true,
	"sqlite_temp_schema": true,
}

// FunctionInfo is one row of DuckDB's function catalog (duckdb_functions).
type FunctionInfo struct {
	Name, Type, Stability, Macro string
}

// Functions says which functions a job's SQL may not call, from DuckDB's
// own function catalog: Volatile ones give another value on every run
// (stability VOLATILE or CONSISTENT_WITHIN_QUERY, and macros built on
// one); Session ones read the database's catalog, the session or the
// engine (and macros built on one, or on a catalog table function).
// Views are the catalog's own views (pg_tables, sqlite_master ...).
type Functions struct {
	Volatile, Session, Views map[string]bool
}

// DefaultFunctions are the fixed lists alone, for checks made without a
// database.
func DefaultFunctions() *Functions { return NewFunctions(nil, nil) }

// NewFunctions builds Functions from DuckDB's function catalog and its
// internal views (view name, schema name).
func NewFunctions(infos []FunctionInfo, views [][2]string) *Functions {
	f := &Functions{Volatile: map[string]bool{}, Session: map[string]bool{}, Views: map[string]bool{}}
	for n := range Nondeterministic {
		f.Volatile[n] = true
	}
	for n := range sessionFunctions {
		f.Session[n] = true
	}
	for n := range catalogViews {
		f.Views[n] = true
	}
	for _, v := range views {
		if !strings.EqualFold(v[1], "information_schema") {
			f.Views[strings.ToLower(v[0])] = true
		}
	}
	for _, in := range infos {
		name := strings.ToLower(in.Name)
		switch {
		case name == "error":
			// VOLATILE to DuckDB's optimizer (it must not be folded away),
			// yet it fails the same way on the same input.
		case name == "getvariable" || name == "current_setting":
			// CONSISTENT_WITHIN_QUERY from DuckDB 2.0 on (CONSISTENT in
			// 1.5), as a SET between two queries changes them. idem sets
			// the variables a step reads (its params and input, part of
			// the job key) before every run; current_setting is refused
			// as reading outside the job (outsideFunctions).
		case in.Stability == "VOLATILE" || in.Stability == "CONSISTENT_WITHIN_QUERY":
			f.Volatile[name] = true
		case in.Type == "table" && (strings.HasPrefix(name, "duckdb_") || strings.HasPrefix(name, "pragma_")):
			f.Session[name] = true
		case in.Type == "scalar" && strings.HasPrefix(name, "pg_"):
			f.Session[name] = true
		}
	}
	// A macro is what its definition calls: repeat until no macro joins.
	for changed := true; changed; {
		changed = false
		for _, in := range infos {
			name := strings.ToLower(in.Name)
			if in.Macro == "" || f.Volatile[name] || f.Session[name] {
				continue
			}
			for _, c := range CalledNames(in.Macro) {
				switch {
				case f.Volatile[c.Name] || (!c.Call && NondeterministicRefs[c.Name]):
					f.Volatile[name], changed = true, true
				case f.Session[c.Name] || f.Views[c.Name]:
					f.Session[name], changed = true, true
				default:
					continue
				}
				break
			}
		}
	}
	return f
}

// CalledName is a name a text calls (name followed by an opening
// parenthesis) or names as a plain word, lower case, with its offset.
type CalledName struct {
	Name string
	Call bool
	At   int
}

// CalledNames lists the words of text outside strings and comments: each
// plain or quoted name, lower case, and whether a parenthesis follows it
// (a call: random(), "random" (), main.random()).
func CalledNames(text string) []CalledName {
	masked := sqltext.MaskSQL(text)
	toks := sqlTokens(text, masked)
	var out []CalledName
	for i, t := range toks {
		if t.punct != 0 || t.word == "" {
			continue
		}
		quoted := masked[t.start] == '"'
		call := i+1 < len(toks) && toks[i+1].punct == '('
		if quoted && !call {
			continue // "current_date" is a column
		}
		out = append(out, CalledName{Name: strings.ToLower(t.word), Call: call, At: t.start})
	}
	return out
}

// RecordedFunctions are the Functions recorded for the DuckDB library of
// version (enginefuncs_gen.go), or nil when none is recorded for it.
func RecordedFunctions(version string) *Functions {
	if version != recordedFunctions.Version {
		return nil
	}
	f := &Functions{Volatile: map[string]bool{}, Session: map[string]bool{}, Views: map[string]bool{}}
	for _, n := range recordedFunctions.Volatile {
		f.Volatile[n] = true
	}
	for _, n := range recordedFunctions.Session {
		f.Session[n] = true
	}
	for _, n := range recordedFunctions.Views {
		f.Views[n] = true
	}
	return f
}

// FunctionsRecord is Functions as enginefuncs_gen.go records them: for
// one DuckDB library version, each set's names in order.
type FunctionsRecord struct {
	Version                  string
	Volatile, Session, Views []string
}

// Record is f as enginefuncs_gen.go records it for version.
func (f *Functions) Record(version string) FunctionsRecord {
	return FunctionsRecord{Version: version, Volatile: report.SortedKeys(f.Volatile), Session: report.SortedKeys(f.Session), Views: report.SortedKeys(f.Views)}
}
