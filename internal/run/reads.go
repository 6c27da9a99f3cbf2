package run

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
)

// ParseQuery parses one query with DuckDB's json_serialize_sql on q: the
// statement's node, or ok false when the text is not one statement DuckDB
// can serialize (a parse error is not an error here).
func ParseQuery(ctx context.Context, q catalog.Querier, query string) (node map[string]any, ok bool, err error) {
	var text string
	if err := q.QueryRowContext(ctx, "SELECT CAST(json_serialize_sql(?::VARCHAR) AS VARCHAR)", query).Scan(&text); err != nil {
		return nil, false, fmt.Errorf("parse SQL: %w", err)
	}
	var parsed struct {
		Error      bool `json:"error"`
		Statements []struct {
			Node map[string]any `json:"node"`
		} `json:"statements"`
	}
	if err := json.Unmarshal([]byte(text), &parsed); err != nil {
		return nil, false, fmt.Errorf("read parse: %w", err)
	}
	if parsed.Error || len(parsed.Statements) != 1 {
		return nil, false, nil
	}
	return parsed.Statements[0].Node, true, nil
}

// checkReads refuses (a *job.UsageError, exit 2) a job whose steps (a
// model's included) read a table or view of the database's main schema
// that is neither the job's own (job.OwnRelations) nor read through
// {{upstream:NAME}}: its rows would be outside the job key, so a change to
// them would leave the job skipped over stale rows. Names that the
// database does not hold are left to the steps to fail on.
func checkReads(ctx context.Context, q catalog.Querier, j *job.Job) error {
	own := j.OwnRelations()
	parse := func(text string) (map[string]any, bool, error) { return ParseQuery(ctx, q, text) }
	for _, s := range j.Steps {
		queries, err := job.TextQueries(j.Expand(s.SQL), parse)
		if err != nil {
			return fmt.Errorf("step %s: %w", s.Name, err)
		}
		for _, pq := range queries {
			for _, t := range job.ForeignReads(job.TableReads(pq.Node), own) {
				var n int
				if err := q.QueryRowContext(ctx, `SELECT count(*) FROM (
					SELECT table_name AS name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'
					UNION ALL
					SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal
				) WHERE lower(name) = lower(?)`, t).Scan(&n); err != nil {
					return fmt.Errorf("look up table %s: %w", t, err)
				}
				if n > 0 {
					return job.Usage("step %s reads table %s of the database, which is not a declared upstream: declare it in [input] upstream and read it as {{upstream:%s}}", s.Name, t, t)
				}
			}
		}
	}
	return nil
}
