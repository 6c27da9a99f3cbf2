package source

import (
	"context"
	"database/sql"

	_ "github.com/duckdb/duckdb-go/v2"
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
