package job

import (
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/sqltext"
	"net/url"
	"path/filepath"
	"strings"
)

// Publish is the job file's [publish] table: where every committed snapshot
// of the job is published besides idem's own database. It says where a
// copy goes, never what a snapshot holds, so it is not part of the job key.
type Publish struct {
	Iceberg *PublishIceberg `toml:"iceberg"`
}

// PublishIceberg is [publish.iceberg]: every committed snapshot of the job
// becomes one Apache Iceberg snapshot of the table <namespace>.<target> in
// a SQL catalog. The core idem binary does not publish (the publisher is
// the separate idem-iceberg binary); it only says so after a commit.
type PublishIceberg struct {
	// Catalog is the SQL catalog: a postgres:// (or postgresql://) URL, or
	// a SQLite database as a file path or sqlite:// URL (resolved from the
	// job file's folder); or the http(s):// URL of an Iceberg REST catalog.
	Catalog string `toml:"catalog"`
	// Warehouse is where data and metadata files go: a file:// URL or a
	// folder path (resolved from the job file's folder), always held as a
	// file:// URL of an absolute path; or an S3 (or S3-compatible) object
	// store, s3://BUCKET/PREFIX.
	Warehouse string `toml:"warehouse"`
	// Namespace is the Iceberg namespace of the table.
	Namespace string `toml:"namespace"`
}

// CatalogKind is "postgres" or "sqlite" (which SQL catalog Catalog
// names), or "rest" (an Iceberg REST catalog at an http(s):// URL).
func (p *PublishIceberg) CatalogKind() string {
	switch {
	case strings.HasPrefix(p.Catalog, "postgres://"), strings.HasPrefix(p.Catalog, "postgresql://"):
		return "postgres"
	case strings.HasPrefix(p.Catalog, "http://"), strings.HasPrefix(p.Catalog, "https://"):
		return "rest"
	}
	return "sqlite"
}

// checkPublish checks [publish.iceberg] and resolves its paths from dir,
// the job file's folder.
func checkPublish(p *Publish, dir string, bad jobfs.KeyErrorFunc) error {
	if p == nil || p.Iceberg == nil {
		return nil
	}
	ice := p.Iceberg
	for _, k := range []struct{ key, v string }{{"catalog", ice.Catalog}, {"warehouse", ice.Warehouse}, {"namespace", ice.Namespace}} {
		if strings.TrimSpace(k.v) == "" {
			return bad("publish.iceberg."+k.key, "missing: [publish.iceberg] needs catalog, warehouse and namespace")
		}
	}
	if !sqltext.Identifier.MatchString(ice.Namespace) {
		return bad("publish.iceberg.namespace", "must be letters, digits and underscores, starting with a letter (got %q)", ice.Namespace)
	}
	switch c := ice.Catalog; {
	case strings.HasPrefix(c, "postgres://"), strings.HasPrefix(c, "postgresql://"):
		u, err := url.Parse(c)
		if err != nil || strings.Trim(u.Path, "/") == "" {
			return bad("publish.iceberg.catalog", "want postgres://USER@HOST:PORT/DATABASE (got %q)", c)
		}
	case strings.HasPrefix(c, "http://"), strings.HasPrefix(c, "https://"):
		u, err := url.Parse(c)
		if err != nil || u.Host == "" {
			return bad("publish.iceberg.catalog", "want the http(s):// URL of an Iceberg REST catalog (got %q)", c)
		}
	case strings.HasPrefix(c, "sqlite://"):
		path := strings.TrimPrefix(c, "sqlite://")
		if path == "" {
			return bad("publish.iceberg.catalog", "want sqlite:///path/to/catalog.db or a file path (got %q)", c)
		}
		ice.Catalog = resolveJobPath(dir, path)
	case strings.Contains(c, "://"):
		return bad("publish.iceberg.catalog", "want a postgres:// URL, a SQLite file (path or sqlite:// URL) or an http(s):// Iceberg REST catalog, not %q", c)
	default:
		ice.Catalog = resolveJobPath(dir, c)
	}
	w := ice.Warehouse
	switch {
	case strings.HasPrefix(w, "file://"):
		u, err := url.Parse(w)
		if err != nil || u.Host != "" || !filepath.IsAbs(u.Path) {
			return bad("publish.iceberg.warehouse", "want file:///absolute/folder (got %q)", w)
		}
		w = u.Path
	case strings.HasPrefix(w, "s3://"):
		// An object store: endpoint, region and credentials come from the
		// environment as the AWS SDKs read them (AWS_ENDPOINT_URL_S3 or
		// AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, ...).
		u, err := url.Parse(w)
		if err != nil || u.Host == "" {
			return bad("publish.iceberg.warehouse", "want s3://BUCKET or s3://BUCKET/PREFIX (got %q)", w)
		}
		ice.Warehouse = strings.TrimSuffix(w, "/")
		return nil
	case strings.Contains(w, "://"):
		return bad("publish.iceberg.warehouse", "want a local folder (a path or file:// URL) or an s3://BUCKET/PREFIX object store (got %q)", w)
	default:
		w = resolveJobPath(dir, w)
	}
	abs, err := filepath.Abs(w)
	if err != nil {
		return bad("publish.iceberg.warehouse", "%v", err)
	}
	ice.Warehouse = (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	return nil
}

// PublishTempDir is the folder beside the database at dbPath where a
// publisher (idem-iceberg) keeps the plaintext exports it hashes while
// publishing or verifying, one sub-folder per process. The next publisher
// removes what a killed one left there, and an erasure removes the folder
// before it commits, so that no copy of an erased subject outlives the
// erasure in it.
func PublishTempDir(dbPath string) string { return dbPath + ".publish-tmp" }
