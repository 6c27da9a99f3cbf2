package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/sqltext"
)

// ChangedValuesSelect returns a SELECT of the distinct values of columns
// sel (one: a partition column; several: a model's key) over the rows of
// job j's target that differ between snapshots from and to (from < to):
// the rows valid at to and not at from, and those valid at from and not
// at to, as multisets, so that a row that changed its values of sel names
// both. A row rewritten with the same values names none. A caller may
// treat the values as a bound: an incremental model that recomputed a
// partition (or key) that did not change would get the same rows.
//
// Its cost follows what changed but for one read of the history's rows
// that began at or before from (the rows at from of the changed keys) in
// a history of appended rows; closed rows are read where they began or
// ended in (from, to].
func ChangedValuesSelect(ctx context.Context, q Querier, j string, cols []TargetColumn, sel []string, from, to int64) (string, error) {
	f, err := readHistoryFormat(ctx, q, j)
	if err != nil {
		return "", err
	}
	casts, err := historyCasts(ctx, q, j, cols)
	if err != nil {
		return "", err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
	}
	list := strings.Join(names, ", ")
	// differ keeps the rows (of list, each with idem_w: 1 for a row at
	// to, -1 for one at from) whose count at to is not their count at
	// from: the rows of (new EXCEPT ALL old) and (old EXCEPT ALL new).
	differ := func(rows string) string {
		return "SELECT DISTINCT " + strings.Join(quoteAll(sel), ", ") + " FROM (SELECT " + list + " FROM (" + rows + ") GROUP BY " + list + " HAVING sum(idem_w) <> 0)"
	}
	hist := HistoryTable(j)
	F, T := fmt.Sprint(from), fmt.Sprint(to)
	switch {
	case f == nil && casts == "":
		// Closed rows, read by the interval test alone: a row at to and
		// not at from began in (from, to], one at from and not at to ended
		// there (and one that did both is at neither).
		return differ("SELECT " + list + ", CAST(idem_to IS NULL OR idem_to > " + T + " AS INTEGER) - CAST(idem_from <= " + F + " AS INTEGER) AS idem_w FROM " + hist +
			" WHERE (idem_from > " + F + " AND idem_from <= " + T + ") OR (idem_to > " + F + " AND idem_to <= " + T + ")"), nil
	case f == nil || casts != "" || from+1 < f.Since:
		// Retyped columns are read back as the snapshots recorded them,
		// and a range that begins before the appended rows mixes both
		// formats: the changes as ChangesSelect reads them.
		changes, err := ChangesSelect(ctx, q, j, cols, nil, from, to)
		if err != nil {
			return "", err
		}
		return differ("SELECT " + list + ", CASE WHEN idem_op = 'upsert' THEN 1 ELSE -1 END AS idem_w FROM (" + changes + ")"), nil
	}
	// Appended rows, every snapshot in (from, to] written so: a key whose
	// rows differ between from and to has a row (or a marker) that began
	// in (from, to], and only markers end at or after Since (a closed row
	// ends at a snapshot written with closed rows, or where closeAppended
	// or RebuildHistory end it, before the next Since is set; expiry and
	// erasure only delete rows, and a rollback appends), so a filter on
	// idem_from alone finds them and keeps the zone maps' pruning. A
	// changed key's rows at to are its rows that began at its latest
	// snapshot in (from, to], but a marker; its rows at from are read as
	// pinnedSQL reads them, from the rows that began by from.
	keys := strings.Join(quoteAll(f.Key), ", ")
	hl := make([]string, len(names))
	for i, n := range names {
		hl[i] = "h." + n
	}
	hk := make([]string, len(f.Key))
	for i, k := range quoteAll(f.Key) {
		hk[i] = "h." + k
	}
	atTo := "idem_to IS NULL OR idem_to > idem_from"
	last := ""
	if to > from+1 {
		// Rows that began in one snapshot supersede none of each other.
		last = ", max(idem_from) OVER (PARTITION BY " + keys + ") AS idem_lt"
		atTo = "(" + atTo + ") AND idem_from = idem_lt"
	}
	return "WITH idem_n AS (SELECT " + list + ", idem_from, idem_to" + last + " FROM " + hist + " WHERE idem_from > " + F + " AND idem_from <= " + T + "),\n" +
		"idem_k AS (SELECT DISTINCT " + keys + " FROM idem_n)\n" +
		differ("SELECT "+list+", 1 AS idem_w FROM idem_n WHERE "+atTo+"\nUNION ALL\n"+
			"SELECT "+strings.Join(hl, ", ")+", -1 AS idem_w FROM "+hist+" AS h SEMI JOIN idem_k AS k ON "+keyMatch(f.Key, "h", "k")+" WHERE h.idem_from <= "+F+
			" QUALIFY (h.idem_to IS NULL OR h.idem_to > "+F+") AND h.idem_from >= coalesce(max(h.idem_from) FILTER (WHERE h.idem_from >= "+fmt.Sprint(f.Since)+") OVER (PARTITION BY "+strings.Join(hk, ", ")+"), h.idem_from)"), nil
}
