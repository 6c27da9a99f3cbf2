// Object-store warehouses (s3://BUCKET/PREFIX): DuckDB writes each Parquet
// file to a local staging folder (beside the database, runner.Reader.TempDir)
// and the publisher uploads it before any metadata names it: through the
// table's Iceberg FileIO in one PUT, or, for a file larger than one part
// (IDEM_ICEBERG_PART_SIZE bytes, 8 MiB by default), as a multipart upload
// through the FileIO's S3 client. A publisher killed mid-upload leaves at
// most an unfinished multipart upload or an object no table points at,
// aborted or deleted by the next publisher.

package publisher

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/io/gocloud/blobfs"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// FileIO
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/idem-dev/idem/runner"
)

// partSizeEnv names the environment variable that sets the part size of
// multipart uploads, in bytes (Amazon S3 takes no part under 5 MiB but the
// last; the tests use smaller parts on a server that does).
const partSizeEnv = "IDEM_ICEBERG_PART_SIZE"

// defaultPartSize is the part size of multipart uploads, as the AWS
// SDK's transfer manager's.
const defaultPartSize = 8 << 20

// partSize is the part size of uploads from the environment.
func partSize(getenv func(string) string) (int, error) {
	v := getenv(partSizeEnv)
	if v == "" {
		return defaultPartSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a number of bytes above 0", partSizeEnv, v)
	}
	return n, nil
}

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
func s3Props(cfg *runner.IcebergTable, getenv func(string) string) map[string]string {
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
// tbl's FileIO: in one PUT, or in parts (multipartUpload) when it is an
// S3 object larger than one part.
// fault is called with FaultMidUpload once the bytes are sent and the
// upload not yet completed (the object does not exist yet).
func upload(ctx context.Context, tbl *table.Table, path, url string, fault func(string)) error {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	part, err := partSize(os.Getenv)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	var client *s3.Client
	if b, ok := fsys.(*blobfs.FileIO); ok && st.Size() > int64(part) && b.As(&client) {
		if err := multipartUpload(ctx, client, url, f, st.Size(), int64(part), fault); err != nil {
			return fmt.Errorf("upload %s: %w", url, err)
		}
		return nil
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return fmt.Errorf("the FileIO of %s cannot write", tbl.Location())
	}
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

// multipartUpload uploads f (size bytes) to the S3 object at url in parts
// of part bytes, each with its CRC32, and completes the upload; on an
// error it aborts the upload, so that no part is left on the server (a
// killed publisher's are aborted by the next one, abortUploads).
func multipartUpload(ctx context.Context, client *s3.Client, url string, f io.ReaderAt, size, part int64, fault func(string)) (err error) {
	bucket, key, err := splitS3(url)
	if err != nil {
		return err
	}
	up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key, ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_, _ = client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId})
		}
	}()
	var parts []s3types.CompletedPart
	for off, n := int64(0), int32(1); off < size; off, n = off+part, n+1 {
		length := min(part, size-off)
		out, err := client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId, PartNumber: aws.Int32(n),
			Body: io.NewSectionReader(f, off, length), ContentLength: aws.Int64(length), ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32})
		if err != nil {
			return fmt.Errorf("part %d: %w", n, err)
		}
		parts = append(parts, s3types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32})
	}
	fault(FaultMidUpload)
	_, err = client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}})
	return err
}

// splitS3 is the bucket and key of an s3:// URL.
func splitS3(u string) (bucket, key string, err error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", "", err
	}
	return p.Host, strings.TrimPrefix(p.Path, "/"), nil
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
	dir, err := p.db.TempDir()
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

// abortUploads aborts the multipart uploads under tbl's location that
// began before since: a publisher killed mid-upload leaves its parts on
// the server, in no object, until they are aborted.
func abortUploads(ctx context.Context, tbl *table.Table, since time.Time) error {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	b, ok := fsys.(*blobfs.FileIO)
	var client *s3.Client
	if !ok || !b.As(&client) {
		return nil // not S3: nothing of this kind to abort
	}
	bucket, prefix, err := splitS3(tbl.Location())
	if err != nil {
		return err
	}
	prefix = strings.TrimSuffix(prefix, "/") + "/"
	in := &s3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: &prefix}
	for {
		out, err := client.ListMultipartUploads(ctx, in)
		if err != nil {
			return fmt.Errorf("list the unfinished uploads under %s: %w", tbl.Location(), err)
		}
		for _, up := range out.Uploads {
			if up.Initiated == nil || !up.Initiated.Before(since) {
				continue
			}
			if _, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: up.Key, UploadId: up.UploadId}); err != nil {
				return fmt.Errorf("abort the unfinished upload of s3://%s/%s: %w", bucket, *up.Key, err)
			}
		}
		if out.IsTruncated == nil || !*out.IsTruncated {
			return nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}
