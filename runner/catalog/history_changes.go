package catalog

import (
	"fmt"
	"strings"

	"github.com/idem-dev/idem/runner/job"
)

// ChangesSelect returns a SELECT of the rows of job j's target that differ
// between snapshots from and to (from < to; from 0 before the first), read
// from its history, with a column idem_op:
//
//   - 'upsert': a row valid at to that began after from (a new key, or a
//     new version of one);
//   - 'delete': a row valid at from and closed at or before to, whose key
//     has no row valid at to. It carries the key and the old values of the
//     other columns.
//
// Both read only history rows that began or ended in (from, to], so the
// cost follows what changed, not the size of the table. key names one row
// at each snapshot (the upstream's key); without one, every closed row is a
// delete and every new row an upsert. Rows come in key order (all columns
// without a key), a total order.
func ChangesSelect(j string, cols []TargetColumn, key []string, from, to int64) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = job.QuoteIdent(c.Name)
	}
	list := strings.Join(names, ", ")
	hist := HistoryTable(j)
	upserts := fmt.Sprintf("SELECT %s FROM %s WHERE idem_from > %d AND idem_from <= %d AND (idem_to IS NULL OR idem_to > %d)",
		list, hist, from, to, to)
	closed := fmt.Sprintf("SELECT %s FROM %s WHERE idem_from <= %d AND idem_to > %d AND idem_to <= %d",
		list, hist, from, from, to)
	if len(key) == 0 {
		return "SELECT *, 'upsert' AS idem_op FROM (" + upserts + ")\nUNION ALL\nSELECT *, 'delete' AS idem_op FROM (" + closed + ")\nORDER BY ALL"
	}
	keys := make([]string, len(key))
	match := make([]string, len(key))
	for i, k := range key {
		keys[i] = job.QuoteIdent(k)
		match[i] = "c." + keys[i] + " = u." + keys[i]
	}
	// A key cannot hold two rows at one snapshot, so a key with a row
	// valid at to whose row at from was closed has that row among the
	// upserts: the anti join leaves the keys that are gone.
	return "WITH idem_up AS (" + upserts + ")\n" +
		"SELECT *, 'upsert' AS idem_op FROM idem_up\nUNION ALL\n" +
		"SELECT c.*, 'delete' AS idem_op FROM (" + closed + ") AS c ANTI JOIN idem_up AS u ON " + strings.Join(match, " AND ") +
		"\nORDER BY " + strings.Join(keys, ", ")
}
