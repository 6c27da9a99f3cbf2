package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/job"
)

// ChangedValuesSelect returns a SELECT of the distinct values of columns
// sel (one: a partition column; several: a model's key) over the rows of
// job j's target that differ between snapshots from and to (from < to):
// the rows valid at to and not at from, and those valid at from and not
// at to, so that a row that changed its values of sel names both. A row
// rewritten with the same values names none. It may name a value more
// (never fewer): an incremental model then recomputes a partition (or key)
// that did not change, which gives the same rows.
//
// With appended rows kept by key (the usual history of a keyed target)
// its cost follows what changed (ChangesSelect by key, and the rows at
// from of the keys upserted); otherwise it reads the history rows that
// began or ended in (from, to].
func ChangedValuesSelect(ctx context.Context, q Querier, j string, cols []TargetColumn, key []string, sel []string, from, to int64) (string, error) {
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
		names[i] = job.QuoteIdent(c.Name)
	}
	list := strings.Join(names, ", ")
	differ := "SELECT DISTINCT " + strings.Join(quoteAll(sel), ", ") + " FROM ((SELECT * FROM idem_new EXCEPT ALL SELECT * FROM idem_old) UNION ALL (SELECT * FROM idem_old EXCEPT ALL SELECT * FROM idem_new))"
	if f == nil || len(key) == 0 || !slices.Equal(f.Key, key) || casts != "" {
		changes, err := ChangesSelect(ctx, q, j, cols, nil, from, to)
		if err != nil {
			return "", err
		}
		return "WITH idem_c AS MATERIALIZED (" + changes + "),\n" +
			"idem_new AS MATERIALIZED (SELECT " + list + " FROM idem_c WHERE idem_op = 'upsert'),\n" +
			"idem_old AS MATERIALIZED (SELECT " + list + " FROM idem_c WHERE idem_op = 'delete')\n" + differ, nil
	}
	// By key: the upserts (new rows) and the gone keys' rows at from come
	// from ChangesSelect; the rows at from of the upserted keys are each
	// key's latest row begun by from that is open at from (an older one
	// when the latest is a marker: a value more, which is allowed).
	hist := HistoryTable(j)
	keys := strings.Join(quoteAll(key), ", ")
	hl := make([]string, len(names))
	for i, n := range names {
		hl[i] = "h." + n
	}
	hk := make([]string, len(key))
	for i, k := range quoteAll(key) {
		hk[i] = "h." + k
	}
	F := fmt.Sprint(from)
	return "WITH idem_c AS MATERIALIZED (" + changesByKeySQL(j, names, f, from, to) + "),\n" +
		"idem_new AS MATERIALIZED (SELECT " + list + " FROM idem_c WHERE idem_op = 'upsert'),\n" +
		"idem_was AS MATERIALIZED (SELECT " + strings.Join(hl, ", ") + " FROM " + hist + " AS h SEMI JOIN (SELECT " + keys + " FROM idem_new) AS k ON " + keyMatch(key, "h", "k") +
		" WHERE h.idem_from <= " + F + " AND (h.idem_to IS NULL OR h.idem_to > " + F + ")" +
		" QUALIFY row_number() OVER (PARTITION BY " + strings.Join(hk, ", ") + " ORDER BY h.idem_from DESC) = 1),\n" +
		"idem_old AS MATERIALIZED (SELECT " + list + " FROM idem_c WHERE idem_op = 'delete' UNION ALL SELECT * FROM idem_was)\n" + differ, nil
}
