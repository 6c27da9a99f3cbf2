package run

import (
	"context"
	"database/sql"

	"github.com/idem-dev/idem/internal/report"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
)

// DuckDB's query progress. DuckDB tracks how far the running statement is
// (duckdb_query_progress) when enable_progress_bar is on; duckdb-go binds the
// C call but keeps the connection handle it needs unexported. rawConnection
// reads that handle from the pinned connection, checking its type, so a
// duckdb-go whose Conn no longer holds one degrades to no percentage
// (TestQueryProgressIsReported fails then, so an upgrade notices).

// rawConnection returns the DuckDB connection handle of conn.
func rawConnection(conn *sql.Conn) (mapping.Connection, bool) {
	var c mapping.Connection
	ok := false
	_ = conn.Raw(func(driverConn any) error {
		switch dc := driverConn.(type) {
		case *cachedConn:
			c, ok = dc.raw, dc.countable
		case *duckdb.Conn:
			c, ok = driverConnection(dc)
		}
		return nil
	})
	return c, ok
}

// withQueryProgress turns on DuckDB's progress tracking on conn (without
// its own printing) and returns p with a poll of the running statement's
// percentage, when p shows progress at all. conn must stay open as long as
// the returned Progress is used.
func withQueryProgress(ctx context.Context, p report.Progress, conn *sql.Conn) report.Progress {
	if p.Step == nil || p.Percent == nil {
		return p
	}
	raw, ok := rawConnection(conn)
	if !ok {
		return p
	}
	for _, q := range []string{"SET enable_progress_bar = true", "SET enable_progress_bar_print = false"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return p
		}
	}
	p = p.WithQuery(func() float64 {
		qp := mapping.QueryProgress(raw)
		pct, _, _ := mapping.QueryProgressTypeMembers(&qp)
		return pct
	})
	return p
}
