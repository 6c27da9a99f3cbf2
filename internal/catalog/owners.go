package catalog

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
)

// Ownership: a job's target, its companions (the {{table:_suffix}} objects
// of its schema and steps: outcomes, active view, tombstones) and its
// history belong to that job. idem.owners records each claimed name, lower
// case as DuckDB compares identifiers, with its job. A command that would
// write a name claimed by another job is refused before it writes anything,
// inside its own transaction; a committing command claims its names in that
// transaction.

// ownedName is one table or view a job writes.
type ownedName struct {
	key     string // lower-cased schema.name: the identity DuckDB uses
	display string // as the user would write it
}

// ownedNames are the target, the companions and the history of job.
func ownedNames(j *job.Job) []ownedName {
	names := []ownedName{{key: ownerKey("main", j.Table), display: fmt.Sprintf("table %q", j.Table)}}
	suffixes := map[string]bool{}
	for _, text := range append([]string{j.DDL}, stepTexts(j.Steps)...) {
		for _, m := range pipeline.Companion.FindAllStringSubmatch(text, -1) {
			suffixes[m[1]] = true
		}
	}
	if j.Pipeline.OutcomesTable != "" {
		suffixes[j.Pipeline.OutcomesTable] = true
	}
	sorted := make([]string, 0, len(suffixes))
	for s := range suffixes {
		sorted = append(sorted, s)
	}
	sort.Strings(sorted)
	for _, s := range sorted {
		names = append(names, ownedName{key: ownerKey("main", j.Table+s), display: fmt.Sprintf("table %q", j.Table+s)})
	}
	names = append(names, ownedName{key: ownerKey("idem", j.Name+"__history"), display: "history table " + HistoryTable(j.Name)})
	return names
}

func stepTexts(steps []pipeline.Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.SQL
	}
	return out
}

func ownerKey(schema, name string) string { return strings.ToLower(schema + "." + name) }

// CheckOwners refuses (guard "owner") when a table or view job would write
// belongs to another job. With claim, it records the names not yet claimed
// as job's, in tx: they stay claimed only if tx commits.
func CheckOwners(ctx context.Context, tx Querier, j *job.Job, claim bool) error {
	names := ownedNames(j)
	// One query for every name (a run checks four or more; each query is a
	// round trip of a fixed cost), the first owner of each by job name.
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = n.key
	}
	owners, err := StringMap(ctx, tx, `SELECT name, min(job) FROM idem.owners WHERE list_contains(?::VARCHAR[], name) GROUP BY name`, keys)
	if err != nil {
		return fmt.Errorf("read the owners of job %s's tables: %w", j.Name, err)
	}
	for _, n := range names {
		owner, ok := owners[n.key]
		switch {
		case !ok:
			if !claim {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO idem.owners (name, job, claimed_at) VALUES (?, ?, current_timestamp)`, n.key, j.Name); err != nil {
				return fmt.Errorf("claim %s for job %s: %w", n.display, j.Name, err)
			}
			owners[n.key] = j.Name
		case owner != j.Name:
			return report.Refuse("owner", "%s belongs to job %q; job %q may not create or write it: give job %q another [target] table (or name)",
				n.display, owner, j.Name, j.Name)
		}
	}
	return nil
}
