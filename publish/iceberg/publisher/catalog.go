package publisher

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/idem-dev/idem/runner"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for a PostgreSQL catalog
	"github.com/uptrace/bun/driver/sqliteshim"
)

// CatalogName is the name of idem's catalog in the SQL catalog's tables
// (the catalog_name column): Spark and Trino name it the same to read it.
const CatalogName = "idem"

// Catalog is an open catalog: a SQL catalog (PostgreSQL or SQLite), or
// an Iceberg REST catalog.
type Catalog struct {
	catalog.Catalog
	close func() error
}

// Close closes the catalog's handles.
func (c *Catalog) Close() error { return c.close() }

// OpenCatalog opens the catalog cfg names, creating a SQL catalog's tables
// when they are missing. Each call gives a fresh handle.
func OpenCatalog(ctx context.Context, cfg *runner.IcebergTable) (*Catalog, error) {
	props := iceberg.Properties{"warehouse": cfg.Warehouse}
	for k, v := range s3Props(cfg, os.Getenv) {
		props[k] = v
	}
	var (
		db      *sql.DB
		dialect sqlcat.SupportedDialect
		err     error
	)
	switch cfg.CatalogKind() {
	case "rest":
		c, err := rest.NewCatalog(ctx, CatalogName, cfg.Catalog, rest.WithWarehouseLocation(cfg.Warehouse), rest.WithAdditionalProps(props))
		if err != nil {
			return nil, fmt.Errorf("open Iceberg REST catalog %s: %w", redact(cfg.Catalog), err)
		}
		return &Catalog{Catalog: c, close: c.Close}, nil
	case "postgres":
		db, err = sql.Open("pgx", cfg.Catalog)
		dialect = sqlcat.Postgres
	default:
		// WAL and a busy timeout let two publishers (and readers) share
		// the file; the loser of a commit is refused by the catalog's
		// compare-and-swap, not by a lock error.
		dsn := "file:" + (&url.URL{Path: cfg.Catalog}).EscapedPath() + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
		db, err = sql.Open(sqliteshim.ShimName, dsn)
		dialect = sqlcat.SQLite
	}
	if err != nil {
		return nil, fmt.Errorf("open Iceberg catalog %s: %w", redact(cfg.Catalog), err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open Iceberg catalog %s: %w", redact(cfg.Catalog), err)
	}
	c, err := sqlcat.NewCatalog(CatalogName, db, dialect, props)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open Iceberg catalog %s: %w", redact(cfg.Catalog), err)
	}
	return &Catalog{Catalog: c, close: func() error { return errors.Join(c.Close(), db.Close()) }}, nil
}

// redact drops a password from a catalog URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// Ident is the Iceberg table job j publishes to: <namespace>.<target>.
func Ident(j *runner.JobInfo) table.Identifier {
	return table.Identifier{j.Iceberg.Namespace, j.Target}
}

// loadTable loads job j's table, or returns nil when it does not exist.
func (c *Catalog) loadTable(ctx context.Context, j *runner.JobInfo) (*table.Table, error) {
	t, err := c.LoadTable(ctx, Ident(j))
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load Iceberg table %s: %w", Ident(j), err)
	}
	return t, nil
}

// ensureNamespace creates the job's namespace when it is missing.
func (c *Catalog) ensureNamespace(ctx context.Context, j *runner.JobInfo) error {
	ns := table.Identifier{j.Iceberg.Namespace}
	ok, err := c.CheckNamespaceExists(ctx, ns)
	if err != nil {
		return fmt.Errorf("Iceberg namespace %s: %w", ns, err)
	}
	if ok {
		return nil
	}
	if err := c.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return fmt.Errorf("create Iceberg namespace %s: %w", ns, err)
	}
	return nil
}
