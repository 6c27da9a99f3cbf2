package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/sqltext"
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
// With closed rows both read only history rows that began or ended in
// (from, to], so the cost follows what changed, not the size of the table;
// with appended rows (see RecordHistory) they read every history row of
// the keys that changed in (from, to]. key names one row
// at each snapshot (the upstream's key); without one, every closed row is a
// delete and every new row an upsert. Rows come in key order (all columns
// without a key), a total order.
func ChangesSelect(ctx context.Context, q Querier, j string, cols []TargetColumn, key []string, from, to int64) (string, error) {
	f, err := readHistoryFormat(ctx, q, j)
	if err != nil {
		return "", err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
	}
	text := changesSQL(j, names, f, key, from, to)
	casts, err := historyCasts(ctx, q, j, cols)
	if err != nil || casts == "" {
		return text, err
	}
	// Retyped columns are read back as the snapshots recorded them, in the
	// same order.
	order := "ALL"
	if len(key) > 0 {
		order = strings.Join(quoteAll(key), ", ")
	}
	return "SELECT " + casts + ", idem_op FROM (" + text + ") ORDER BY " + order, nil
}

// changesSQL is ChangesSelect's text for quoted column names and history
// format f.
func changesSQL(j string, names []string, f *historyFormat, key []string, from, to int64) string {
	if f != nil && len(key) > 0 && slices.Equal(f.Key, key) {
		return changesByKeySQL(j, names, f, from, to)
	}
	list := strings.Join(names, ", ")
	hist := HistoryTable(j)
	upserts := fmt.Sprintf("SELECT %s FROM %s WHERE idem_from > %d AND idem_from <= %d AND (idem_to IS NULL OR idem_to > %d)",
		list, hist, from, to, to)
	closed := fmt.Sprintf("SELECT %s FROM %s WHERE idem_from <= %d AND idem_to > %d AND idem_to <= %d",
		list, hist, from, from, to)
	prefix := ""
	if f != nil {
		// The rows of the keys that changed in (from, to], each marked
		// with whether it is valid at from and at to (see pinnedSQL).
		hk := strings.Join(quoteAll(f.Key), ", ")
		hl := make([]string, len(names))
		for i, n := range names {
			hl[i] = "h." + n
		}
		prefix = fmt.Sprintf("WITH idem_ck AS (SELECT DISTINCT %s FROM %s WHERE (idem_from > %d AND idem_from <= %d) OR (idem_to > %d AND idem_to <= %d)),\n"+
			"idem_h AS (SELECT h.* FROM %s AS h SEMI JOIN idem_ck AS c ON %s WHERE h.idem_from <= %d),\n"+
			"idem_l AS (SELECT %s, max(idem_from) FILTER (WHERE idem_from <= %d) AS idem_lf, max(idem_from) AS idem_lt FROM idem_h WHERE idem_from >= %d GROUP BY %s),\n"+
			"idem_v AS (SELECT %s, h.idem_from,\n"+
			"  h.idem_from <= %d AND (h.idem_to IS NULL OR h.idem_to > %d) AND (l.idem_lf IS NULL OR h.idem_from >= l.idem_lf) AS idem_at_from,\n"+
			"  (h.idem_to IS NULL OR h.idem_to > %d) AND (l.idem_lt IS NULL OR h.idem_from >= l.idem_lt) AS idem_at_to\n"+
			"  FROM idem_h AS h LEFT JOIN idem_l AS l ON %s)\n",
			hk, hist, from, to, from, to,
			hist, keyMatch(f.Key, "h", "c"), to,
			hk, from, f.Since, hk,
			strings.Join(hl, ", "),
			from, from,
			to, keyMatch(f.Key, "h", "l"))
		upserts = fmt.Sprintf("SELECT %s FROM idem_v WHERE idem_at_to AND idem_from > %d", list, from)
		closed = fmt.Sprintf("SELECT %s FROM idem_v WHERE idem_at_from AND NOT idem_at_to", list)
	}
	if len(key) == 0 {
		return prefix + "SELECT *, 'upsert' AS idem_op FROM (" + upserts + ")\nUNION ALL\nSELECT *, 'delete' AS idem_op FROM (" + closed + ")\nORDER BY ALL"
	}
	keys := make([]string, len(key))
	match := make([]string, len(key))
	for i, k := range key {
		keys[i] = sqltext.QuoteIdent(k)
		match[i] = "c." + keys[i] + " = u." + keys[i]
	}
	// A key cannot hold two rows at one snapshot, so a key with a row
	// valid at to whose row at from was closed has that row among the
	// upserts: the anti join leaves the keys that are gone.
	with := "WITH "
	if prefix != "" {
		with = prefix + ", "
	}
	return with + "idem_up AS (" + upserts + ")\n" +
		"SELECT *, 'upsert' AS idem_op FROM idem_up\nUNION ALL\n" +
		"SELECT c.*, 'delete' AS idem_op FROM (" + closed + ") AS c ANTI JOIN idem_up AS u ON " + strings.Join(match, " AND ") +
		"\nORDER BY " + strings.Join(keys, ", ")
}

// changesByKeySQL is changesSQL for appended rows read by their own key,
// at a cost that follows what changed: the upserts come from the rows that
// began in (from, to] alone (the latest of its key there, not a marker),
// and only the keys that changed there without a row valid at to (gone
// keys, few) are looked up in the whole history for their rows at from.
// A gone key's row at from is a delete when a row of its key appended in
// (from, to] supersedes it, or when it was closed in (from, to].
func changesByKeySQL(j string, names []string, f *historyFormat, from, to int64) string {
	list := strings.Join(names, ", ")
	hist := HistoryTable(j)
	keys := quoteAll(f.Key)
	hk := strings.Join(keys, ", ")
	hl := make([]string, len(names))
	for i, n := range names {
		hl[i] = "h." + n
	}
	eq := make([]string, len(keys))
	for i, k := range keys {
		eq[i] = "c." + k + " = u." + k
	}
	F, T, M := fmt.Sprint(from), fmt.Sprint(to), fmt.Sprint(f.Since)
	// Rows that began in one snapshot supersede none of each other: no
	// window (a sort of every changed row) is needed.
	last := "max(idem_from) FILTER (WHERE idem_from >= " + M + ") OVER (PARTITION BY " + hk + ")"
	if to == from+1 {
		last = "CAST(NULL AS BIGINT)"
	}
	return "WITH idem_n AS (SELECT " + list + ", idem_from, idem_to, " + last + " AS idem_lt FROM " + hist +
		" WHERE idem_from > " + F + " AND idem_from <= " + T + "),\n" +
		"idem_up AS (SELECT " + list + " FROM idem_n WHERE (idem_to IS NULL OR idem_to > " + T + ") AND (idem_lt IS NULL OR idem_from >= idem_lt)),\n" +
		"idem_g AS (SELECT " + hk + ", bool_or(idem_from > " + F + " AND idem_from >= " + M + ") AS idem_sup FROM " + hist +
		" WHERE (idem_from > " + F + " AND idem_from <= " + T + ") OR (idem_to > " + F + " AND idem_to <= " + T + ") GROUP BY " + hk + "),\n" +
		"idem_gone AS (SELECT c.* FROM idem_g AS c ANTI JOIN idem_up AS u ON " + strings.Join(eq, " AND ") + "),\n" +
		"idem_f AS (SELECT h.*, g.idem_sup FROM " + hist + " AS h JOIN idem_gone AS g ON " + keyMatch(f.Key, "h", "g") + " WHERE h.idem_from <= " + F + "),\n" +
		"idem_fl AS (SELECT " + hk + ", max(idem_from) AS idem_last FROM idem_f WHERE idem_from >= " + M + " GROUP BY " + hk + "),\n" +
		"idem_del AS (SELECT " + strings.Join(hl, ", ") + " FROM idem_f AS h LEFT JOIN idem_fl AS l ON " + keyMatch(f.Key, "h", "l") +
		" WHERE (h.idem_to IS NULL OR h.idem_to > " + F + ") AND (l.idem_last IS NULL OR h.idem_from >= l.idem_last) AND (h.idem_sup OR h.idem_to <= " + T + "))\n" +
		"SELECT *, 'upsert' AS idem_op FROM idem_up\nUNION ALL\nSELECT *, 'delete' AS idem_op FROM idem_del\nORDER BY " + hk
}
