package lake

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx": a PostgreSQL catalog
	_ "modernc.org/sqlite"             // database/sql driver "sqlite": a SQLite catalog, pure Go
)

// ErrNoTable is returned by CatalogMetadata when the catalog holds no
// such table.
var ErrNoTable = errors.New("no such Iceberg table in the catalog")

// CatalogMetadata looks up the current metadata file of table
// (namespace.table) in the iceberg_tables table of the SQL catalog (the
// Iceberg JDBC/SQL catalog's layout, as iceberg-go, Spark and idem's
// publisher write it): dsn is a postgres:// URL or the path of a SQLite
// file, opened read-only. name, when not empty, is the catalog_name the
// row must have; otherwise the table must be in one catalog only.
func CatalogMetadata(ctx context.Context, dsn, name, table string) (string, error) {
	i := strings.LastIndexByte(table, '.')
	if i <= 0 || i == len(table)-1 {
		return "", fmt.Errorf("iceberg table %q: write namespace.table", table)
	}
	ns, tbl := table[:i], table[i+1:]
	driver, src, ph := "sqlite", "file:"+(&url.URL{Path: dsn}).EscapedPath()+"?mode=ro&_pragma=busy_timeout(10000)", []string{"?", "?", "?"}
	shown := dsn
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		driver, src, ph = "pgx", dsn, []string{"$1", "$2", "$3"}
		if u, err := url.Parse(dsn); err == nil {
			shown = u.Redacted()
		}
	}
	db, err := sql.Open(driver, src)
	if err != nil {
		return "", fmt.Errorf("open Iceberg catalog %s: %w", shown, err)
	}
	defer db.Close()
	q := "SELECT catalog_name, metadata_location FROM iceberg_tables WHERE table_namespace = " + ph[0] + " AND table_name = " + ph[1]
	args := []any{ns, tbl}
	if name != "" {
		q += " AND catalog_name = " + ph[2]
		args = append(args, name)
	}
	rows, err := db.QueryContext(ctx, q+" ORDER BY catalog_name", args...)
	if err != nil {
		return "", fmt.Errorf("read Iceberg catalog %s: %w", shown, err)
	}
	defer rows.Close()
	var names, locs []string
	for rows.Next() {
		var n string
		var loc sql.NullString
		if err := rows.Scan(&n, &loc); err != nil {
			return "", fmt.Errorf("read Iceberg catalog %s: %w", shown, err)
		}
		names, locs = append(names, n), append(locs, loc.String)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read Iceberg catalog %s: %w", shown, err)
	}
	switch {
	case len(locs) == 0:
		return "", fmt.Errorf("iceberg catalog %s: table %s: %w", shown, table, ErrNoTable)
	case len(locs) > 1:
		return "", fmt.Errorf("iceberg catalog %s: table %s is in catalogs %s: name one with catalog_name", shown, table, strings.Join(names, ", "))
	case locs[0] == "":
		return "", fmt.Errorf("iceberg catalog %s: table %s has no metadata location", shown, table)
	}
	return locs[0], nil
}
