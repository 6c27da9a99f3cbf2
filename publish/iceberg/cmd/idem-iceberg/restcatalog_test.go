package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/sqliteshim"
)

// restCatalog serves the Iceberg REST catalog protocol (the part a
// publisher uses: config, namespaces, load, create and commit a table)
// over HTTP on 127.0.0.1, backed by a SQL catalog (SQLite) in the test
// process; the publishers under test are separate processes that reach
// it as they would any REST catalog.
func restCatalog(t *testing.T, warehouse string) string {
	db, err := sql.Open(sqliteshim.ShimName, "file:"+filepath.Join(t.TempDir(), "rest.db")+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	cat, err := sqlcat.NewCatalog("rest", db, sqlcat.SQLite, iceberg.Properties{"warehouse": warehouse})
	require.NoError(t, err)
	t.Cleanup(func() { cat.Close(); db.Close() })
	reply := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		if v != nil {
			_ = json.NewEncoder(w).Encode(v)
		}
	}
	fail := func(w http.ResponseWriter, err error) {
		code := http.StatusInternalServerError
		typ := "ServerError"
		switch {
		case errors.Is(err, catalog.ErrNoSuchNamespace):
			code, typ = http.StatusNotFound, "NoSuchNamespaceException"
		case errors.Is(err, catalog.ErrNoSuchTable):
			code, typ = http.StatusNotFound, "NoSuchTableException"
		case errors.Is(err, catalog.ErrTableAlreadyExists), errors.Is(err, catalog.ErrNamespaceAlreadyExists):
			code, typ = http.StatusConflict, "AlreadyExistsException"
		case strings.Contains(err.Error(), "requirement failed"), strings.Contains(err.Error(), "Requirement failed"):
			code, typ = http.StatusConflict, "CommitFailedException"
		}
		reply(w, code, map[string]any{"error": map[string]any{"message": err.Error(), "type": typ, "code": code}})
	}
	loaded := func(w http.ResponseWriter, tbl *table.Table) {
		reply(w, http.StatusOK, map[string]any{"metadata-location": tbl.MetadataLocation(), "metadata": tbl.Metadata(), "config": map[string]string{}})
	}
	ns := func(r *http.Request) table.Identifier { return strings.Split(r.PathValue("ns"), "\x1f") }
	ident := func(r *http.Request) table.Identifier { return append(ns(r), r.PathValue("table")) }
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, errors.New("the test's REST catalog does not serve "+r.Method+" "+r.URL.Path))
	})
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	})
	mux.HandleFunc("GET /v1/namespaces/{ns}", func(w http.ResponseWriter, r *http.Request) {
		ok, err := cat.CheckNamespaceExists(r.Context(), ns(r))
		switch {
		case err != nil:
			fail(w, err)
		case ok:
			reply(w, http.StatusOK, map[string]any{"namespace": ns(r), "properties": map[string]string{}})
		default:
			fail(w, catalog.ErrNoSuchNamespace)
		}
	})
	mux.HandleFunc("POST /v1/namespaces", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Namespace  table.Identifier   `json:"namespace"`
			Properties iceberg.Properties `json:"properties"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, err)
			return
		}
		if err := cat.CreateNamespace(r.Context(), req.Namespace, req.Properties); err != nil {
			fail(w, err)
			return
		}
		reply(w, http.StatusOK, map[string]any{"namespace": req.Namespace, "properties": req.Properties})
	})
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables/{table}", func(w http.ResponseWriter, r *http.Request) {
		tbl, err := cat.LoadTable(r.Context(), ident(r))
		if err != nil {
			fail(w, err)
			return
		}
		loaded(w, tbl)
	})
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Name          string                 `json:"name"`
			Schema        *iceberg.Schema        `json:"schema"`
			Location      string                 `json:"location"`
			PartitionSpec *iceberg.PartitionSpec `json:"partition-spec"`
			WriteOrder    *table.SortOrder       `json:"write-order"`
			Props         iceberg.Properties     `json:"properties"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, err)
			return
		}
		opts := []catalog.CreateTableOpt{catalog.WithProperties(req.Props)}
		if req.PartitionSpec != nil {
			opts = append(opts, catalog.WithPartitionSpec(req.PartitionSpec))
		}
		if req.Location != "" {
			opts = append(opts, catalog.WithLocation(req.Location))
		}
		tbl, err := cat.CreateTable(r.Context(), append(ns(r), req.Name), req.Schema, opts...)
		if err != nil {
			fail(w, err)
			return
		}
		loaded(w, tbl)
	})
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables/{table}", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Requirements table.Requirements `json:"requirements"`
			Updates      table.Updates      `json:"updates"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, err)
			return
		}
		meta, loc, err := cat.CommitTable(context.WithoutCancel(r.Context()), ident(r), req.Requirements, req.Updates)
		if err != nil {
			fail(w, err)
			return
		}
		reply(w, http.StatusOK, map[string]any{"metadata-location": loc, "metadata": meta})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRESTCatalog publishes through an Iceberg REST catalog (iceberg-go's
// REST client) to a local warehouse: an apply job with an erasure and a
// partitioned refresh job, every kept snapshot read back equal through
// the REST catalog.
func TestRESTCatalog(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	url := restCatalog(t, "file://"+p.lake)
	for _, name := range []string{"accounts.toml", "occ.toml"} {
		b := strings.Replace(string(must(t, filepath.Join(p.dir, name))), "catalog = \""+p.catalog+"\"", "catalog = \""+url+"\"", 1)
		p.write(name, b)
	}
	for _, b := range []string{"batch-1", "batch-2", "batch-3"} {
		require.Contains(t, p.ok(idemIceberg, "run", "accounts.toml", "--input", "changes/"+b+".jsonl"), "iceberg   analytics.accounts: published snapshot")
	}
	require.Contains(t, p.ok(idemIceberg, "erase", "accounts.toml", "--key", "account-2"), "again without the erased rows")
	require.Equal(t, []int64{1, 2, 3, 4}, p.verify("accounts.toml"))
	require.Empty(t, p.lakeHolds("account-2"))
	p.ok(idemIceberg, "run", "occ.toml")
	p.write("occ46.csv", "id,species_id,year,license\n460,1,46,CC0 1.0\n")
	p.ok(idemIceberg, "run", "occ.toml", "--input", "occ46.csv", "--partitions", "46")
	require.Equal(t, []int64{1, 2}, p.verify("occ.toml"))
	require.FileExists(t, filepath.Join(p.dir, "idem.duckdb"))
	require.NoFileExists(t, p.catalog, "the job files name the REST catalog, not the SQLite file")
}

func must(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
