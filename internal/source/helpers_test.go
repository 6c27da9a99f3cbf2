package source

import (
	"context"
	"database/sql"

	_ "github.com/duckdb/duckdb-go/v2"

	// DuckDB's freed memory stays mapped for the next database
	// (docs/reliability.md, How it is tested).
	_ "github.com/idem-dev/idem/internal/testflags"
)

// open opens an in-memory DuckDB.
func open(ctx context.Context, dsn string) (*sql.DB, error) {
	db, err := sql.Open("duckdb", dsn)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}
