// Object-store warehouses (s3://BUCKET/PREFIX): DuckDB writes each Parquet
// file to a local staging folder (beside the database, job.PublishTempDir)
// and the publisher uploads it through the table's Iceberg FileIO (the
// AWS SDK's uploader: a multipart upload above its part size) before any
// metadata names it, so a publisher killed mid-upload leaves at most an
// object no table points at, deleted by the next one's orphan cleanup.

package publisher

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// FileIO
	"github.com/apache/iceberg-go/table"
	"github.com/idem-dev/idem/internal/job"
)

// remote says tbl's files live in an object store rather than on this
// machine.
func remote(tbl *table.Table) bool {
	return !strings.HasPrefix(tbl.Location(), "file:")
}

// s3Props are the FileIO properties of an s3:// warehouse read from the
// environment as the AWS SDKs read it: the endpoint of an S3-compatible
// server (AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL; path-style
// addressing then) and the region. Credentials are left to the SDK's
// default chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, profiles ...).
func s3Props(cfg *job.PublishIceberg, getenv func(string) string) map[string]string {
	props := map[string]string{}
	if !strings.HasPrefix(cfg.Warehouse, "s3://") {
		return props
	}
	for _, k := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if v := getenv(k); v != "" {
			props[icebergio.S3EndpointURL] = v
			break
		}
	}
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if v := getenv(k); v != "" {
			props[icebergio.S3Region] = v
			break
		}
	}
	return props
}

// upload copies the local file at path to the object at url through
// tbl's FileIO.
// fault is called with FaultMidUpload once the bytes are sent and the
// upload not yet completed (the object does not exist yet).
func upload(ctx context.Context, tbl *table.Table, path, url string, fault func(string)) error {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return fmt.Errorf("the FileIO of %s cannot write", tbl.Location())
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := wfs.Create(url)
	if err != nil {
		return fmt.Errorf("upload %s: %w", url, err)
	}
	if _, err := io.Copy(w, f); err != nil {
		w.Close()
		return fmt.Errorf("upload %s: %w", url, err)
	}
	fault(FaultMidUpload)
	if err := w.Close(); err != nil {
		return fmt.Errorf("upload %s: %w", url, err)
	}
	return nil
}

// staging is where DuckDB writes a snapshot's files, and how each becomes
// a file of the table: in place under a local warehouse, uploaded from a
// staging folder to an object store's.
type staging struct {
	dir    string
	tbl    *table.Table
	remote bool
	fault  func(string)
}

// newStaging makes the folder DuckDB writes tbl's new files to; close
// removes it when it is a staging folder.
func (p *publisher) newStaging(tbl *table.Table) (*staging, error) {
	if !remote(tbl) {
		dir := filepath.Join(localPath(tbl.Location()), "data")
		return &staging{dir: dir, tbl: tbl}, os.MkdirAll(dir, 0o755)
	}
	dir, err := tempDir(p.db.Path())
	if err != nil {
		return nil, err
	}
	return &staging{dir: dir, tbl: tbl, remote: true, fault: p.opts.fault}, nil
}

func (st *staging) close() {
	if st.remote {
		os.RemoveAll(st.dir)
	}
}

// place makes the file DuckDB wrote at path a file of the table and
// returns its URL.
func (st *staging) place(ctx context.Context, path string) (string, error) {
	if !st.remote {
		return fileURL(path), nil
	}
	rel, err := filepath.Rel(st.dir, path)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(st.tbl.Location())
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/data/" + filepath.ToSlash(rel)
	return u.String(), upload(ctx, st.tbl, path, u.String(), st.fault)
}
