package job

import (
	"slices"
	"strings"
)

// TableRef is a table a query reads, as DuckDB's parser names it.
type TableRef struct {
	Catalog, Schema, Table string
}

// TableReads lists the tables that a query, parsed by DuckDB's
// json_serialize_sql (the "node" of one statement), reads by name: every
// BASE_TABLE reference, less the names of its common table expressions,
// each once, in a fixed order. Table functions (read_csv, ...) are
// not tables of the database and are left out.
func TableReads(node map[string]any) []TableRef {
	ctes := map[string]bool{}
	var refs []TableRef
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if cm, ok := x["cte_map"].(map[string]any); ok {
				entries, _ := cm["map"].([]any)
				for _, e := range entries {
					if em, ok := e.(map[string]any); ok {
						if k, ok := em["key"].(string); ok {
							ctes[strings.ToLower(k)] = true
						}
					}
				}
			}
			if x["type"] == "BASE_TABLE" {
				r := TableRef{}
				r.Catalog, _ = x["catalog_name"].(string)
				r.Schema, _ = x["schema_name"].(string)
				r.Table, _ = x["table_name"].(string)
				if r.Table != "" && !slices.Contains(refs, r) {
					refs = append(refs, r)
				}
			}
			for _, k := range SortedKeys(x) {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(node)
	out := refs[:0]
	for _, r := range refs {
		if r.Catalog == "" && r.Schema == "" && ctes[strings.ToLower(r.Table)] {
			continue
		}
		out = append(out, r)
	}
	return out
}
