package lake_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/lake"
)

// TestCatalogMetadata: the SQL catalog's iceberg_tables row names the
// table's current metadata; a table in two catalogs needs catalog_name.
func TestCatalogMetadata(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(ctx, `CREATE TABLE iceberg_tables (catalog_name TEXT, table_namespace TEXT, table_name TEXT, metadata_location TEXT, previous_metadata_location TEXT);
		INSERT INTO iceberg_tables VALUES ('idem', 'ns', 'orders', 'file:///w/ns/orders/metadata/00002-a.metadata.json', NULL),
			('idem', 'a.b', 'c', 'file:///w/c/metadata/00001-b.metadata.json', NULL),
			('other', 'a.b', 'c', 'file:///v/c/metadata/00001-c.metadata.json', NULL)`)
	require.NoError(t, err)

	loc, err := lake.CatalogMetadata(ctx, path, "", "ns.orders")
	require.NoError(t, err)
	require.Equal(t, "file:///w/ns/orders/metadata/00002-a.metadata.json", loc)
	_, err = lake.CatalogMetadata(ctx, path, "", "ns.missing")
	require.ErrorIs(t, err, lake.ErrNoTable)
	_, err = lake.CatalogMetadata(ctx, path, "", "a.b.c")
	require.ErrorContains(t, err, "table a.b.c is in catalogs idem, other: name one with catalog_name")
	loc, err = lake.CatalogMetadata(ctx, path, "other", "a.b.c")
	require.NoError(t, err)
	require.Equal(t, "file:///v/c/metadata/00001-c.metadata.json", loc)
}
