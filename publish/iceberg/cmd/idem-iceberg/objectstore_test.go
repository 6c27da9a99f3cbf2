package main

import (
	"database/sql"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/idem-dev/idem/publish/iceberg/internal/s3server"
	"github.com/idem-dev/idem/publish/iceberg/publisher"
	"github.com/stretchr/testify/require"
)

// The object-store tests publish to and read from a real S3-compatible
// server, SeaweedFS (internal/s3server), one per test binary on
// 127.0.0.1, reached over HTTP through the AWS SDK (the publisher) and
// idem's own S3 client (the Iceberg input). Each test has its own prefix
// of the server's bucket.
var s3srv s3server.Shared

// useS3 points the project's environment at the server, as the AWS SDKs
// read it, and returns the test's own s3:// prefix.
func (p *project) useS3() string {
	p.t.Helper()
	srv := s3srv.Get(p.t)
	p.env = append(p.env, srv.Env()...)
	return fmt.Sprintf("s3://%s/%s-%d", s3server.Bucket, strings.ReplaceAll(p.t.Name(), "/", "-"), time.Now().UnixNano())
}

// useWarehouse points the project's job files (accounts and occ unless
// named) at warehouse.
func (p *project) useWarehouse(warehouse string, names ...string) {
	p.t.Helper()
	if len(names) == 0 {
		names = []string{"accounts.toml", "occ.toml"}
	}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(p.dir, name))
		require.NoError(p.t, err)
		p.write(name, strings.Replace(string(b), "file://"+p.lake, warehouse, 1))
	}
}

// mirror copies every object under warehouse into the local folder
// p.lake, so that lakeHolds reads them.
func (p *project) mirror(warehouse string) int {
	p.t.Helper()
	props := map[string]string{}
	for _, kv := range p.env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "AWS_ENDPOINT_URL_S3":
			props[icebergio.S3EndpointURL] = v
		case "AWS_REGION":
			props[icebergio.S3Region] = v
		case "AWS_ACCESS_KEY_ID":
			props[icebergio.S3AccessKeyID] = v
		case "AWS_SECRET_ACCESS_KEY":
			props[icebergio.S3SecretAccessKey] = v
		}
	}
	fsys, err := icebergio.LoadFS(p.t.Context(), props, warehouse)
	require.NoError(p.t, err)
	require.NoError(p.t, os.RemoveAll(p.lake))
	n := 0
	require.NoError(p.t, fsys.(icebergio.ListableIO).WalkDir(warehouse, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := fsys.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		local := filepath.Join(p.lake, filepath.FromSlash(strings.TrimPrefix(path, warehouse)))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			return err
		}
		out, err := os.Create(local)
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, f)
		n++
		return err
	}))
	return n
}

// TestObjectStoreWarehouse publishes an apply job (with an erasure) and a
// partitioned refresh job to an s3:// warehouse, endpoint and credentials
// from the environment: every kept snapshot reads back equal, the erased
// subject is in no object, a publisher killed mid-upload leaves the table
// whole, and no data is left in the staging folder.
func TestObjectStoreWarehouse(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	wh := p.useS3() + "/warehouse"
	p.useWarehouse(wh)
	for _, b := range []string{"batch-1", "batch-2", "batch-3"} {
		require.Contains(t, p.ok(idemIceberg, "run", "accounts.toml", "--input", "changes/"+b+".jsonl"), "iceberg   analytics.accounts: published snapshot")
	}
	require.Equal(t, []int64{1, 2, 3}, p.verify("accounts.toml"))
	require.Positive(t, p.mirror(wh))
	require.NotEmpty(t, p.lakeHolds("account-2"), "the subject is published before its erasure")
	require.Contains(t, p.ok(idemIceberg, "erase", "accounts.toml", "--key", "account-2"), "again without the erased rows")
	require.Equal(t, []int64{1, 2, 3, 4}, p.verify("accounts.toml"))
	p.mirror(wh)
	require.Empty(t, p.lakeHolds("account-2"), "an object holding the erased subject outlives the erasure")

	// Killed mid-upload: no table points at the missing object; the next
	// publisher publishes the snapshot.
	p.env = append(p.env, "IDEM_FAULT="+publisher.FaultMidUpload)
	r := p.run(idemIceberg, "run", "occ.toml")
	p.env = p.env[:len(p.env)-1]
	require.Equal(t, -1, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "killing the process at "+publisher.FaultMidUpload)
	p.publish("occ.toml")
	p.write("occ46.csv", "id,species_id,year,license\n460,1,46,CC0 1.0\n")
	p.ok(idemIceberg, "run", "occ.toml", "--input", "occ46.csv", "--partitions", "46")
	require.Equal(t, []int64{1, 2}, p.verify("occ.toml"))
	require.Empty(t, filesIn(t, filepath.Join(p.dir, "idem.duckdb.publish-tmp")))
}

// TestMultipartUploadKilled: a snapshot whose Parquet file is larger than
// one part (IDEM_ICEBERG_PART_SIZE = 5 MiB, the smallest part S3 takes
// but the last) is uploaded in parts. A publisher killed once it sent its
// parts, before it completed the upload, leaves an unfinished multipart
// upload and no object, and no table pointing at one; the next publisher
// aborts that upload and publishes the snapshot, uploaded in two parts.
func TestMultipartUploadKilled(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	wh := p.useS3() + "/warehouse"
	// 200,000 rows of 64 hex digits: about 7 MB of Parquet.
	p.bigJob("md5(i::VARCHAR) || md5((-i)::VARCHAR) AS h FROM range(200000) r(i)", `h = "VARCHAR"`)
	p.useWarehouse(wh, "big.toml")
	p.env = append(p.env, "IDEM_ICEBERG_PART_SIZE=5242880", "IDEM_FAULT="+publisher.FaultMidUpload)
	r := p.run(idemIceberg, "run", "big.toml")
	p.env = p.env[:len(p.env)-1]
	require.Equal(t, -1, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "killing the process at "+publisher.FaultMidUpload)
	cl := s3srv.Get(t).Client()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(wh, "s3://"), "/")
	ups, err := cl.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: aws.String(key + "/")})
	require.NoError(t, err)
	require.Len(t, ups.Uploads, 1, "the killed publisher's upload is unfinished")
	require.Empty(t, objects(t, cl, bucket, key+"/analytics.db/big/data/"), "no object before the upload completes")

	rep := p.publish("big.toml")
	require.Len(t, rep.Published, 1)
	require.Equal(t, []int64{1}, p.verify("big.toml"))
	data := objects(t, cl, bucket, key+"/analytics.db/big/data/")
	require.Len(t, data, 1)
	for _, etag := range data {
		require.True(t, strings.HasSuffix(strings.Trim(etag, `"`), "-2"), "uploaded in two parts: ETag %s", etag)
	}
	ups, err = cl.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: aws.String(key + "/")})
	require.NoError(t, err)
	require.Empty(t, ups.Uploads, "the killed publisher's upload is aborted")
}

// bigJob writes job big.toml, merging by id the rows of big.parquet, which
// holds SELECT i AS id, 1 AS v, <query> (the other columns, and FROM),
// whose other columns are cols (TOML lines of [input.columns]).
func (p *project) bigJob(query, cols string) {
	p.t.Helper()
	duck, err := sql.Open("duckdb", "")
	require.NoError(p.t, err)
	defer duck.Close()
	_, err = duck.Exec("COPY (SELECT i AS id, 1 AS v, " + query + ") TO '" + filepath.Join(p.dir, "big.parquet") + "'")
	require.NoError(p.t, err)
	p.job("big.toml", `name = "big"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
[input]
path = "big.parquet"
[input.columns]
id = "BIGINT"
v = "INTEGER"
`+cols+`
[target]
key = ["id"]
order_by = "v"
`)
}

// objects maps each object under prefix to its ETag.
func objects(t *testing.T, cl *s3.Client, bucket, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	pg := s3.NewListObjectsV2Paginator(cl, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for pg.HasMorePages() {
		page, err := pg.NextPage(t.Context())
		require.NoError(t, err)
		for _, o := range page.Contents {
			out[*o.Key] = *o.ETag
		}
	}
	return out
}
