package lake

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestS3Signature: the signature of AWS's published Signature Version 4
// example (GET Bucket, max-keys=2 and prefix=J, 24 May 2013).
func TestS3Signature(t *testing.T) {
	t.Parallel()
	s := &S3{Region: "us-east-1", AccessKey: "AKIAIOSFODNN7EXAMPLE", SecretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		now: func() time.Time { return time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC) }}
	u := &url.URL{Scheme: "https", Host: "examplebucket.s3.amazonaws.com", Path: "/", RawQuery: canonicalQuery(url.Values{"max-keys": {"2"}, "prefix": {"J"}})}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	require.NoError(t, err)
	s.sign(req, u)
	require.Equal(t, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
		req.Header.Get("Authorization"))
}

// TestS3Store: a path-style endpoint from the environment; List pages
// through ListObjectsV2 and names only the folder's own objects, Open of a
// missing object is fs.ErrNotExist, Local copies an object once, and an
// s3a:// location reads the same object.
func TestS3Store(t *testing.T) {
	t.Parallel()
	objects := map[string]string{"/lake/t/metadata/v1.metadata.json": "one", "/lake/t/metadata/v2.metadata.json": "two", "/lake/t/metadata/sub/x": "no", "/lake/t/data/a b.parquet": "PAR1"}
	gets := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=idem/") {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if r.URL.Query().Get("list-type") == "2" {
			require.Equal(t, "/lake/", r.URL.Path)
			require.Equal(t, "t/metadata/", r.URL.Query().Get("prefix"))
			if r.URL.Query().Get("continuation-token") == "" {
				io.WriteString(w, `<ListBucketResult><Contents><Key>t/metadata/v1.metadata.json</Key></Contents><IsTruncated>true</IsTruncated><NextContinuationToken>k/2=</NextContinuationToken></ListBucketResult>`)
				return
			}
			require.Equal(t, "k/2=", r.URL.Query().Get("continuation-token"))
			io.WriteString(w, `<ListBucketResult><Contents><Key>t/metadata/v2.metadata.json</Key></Contents><CommonPrefixes><Prefix>t/metadata/sub/</Prefix></CommonPrefixes><IsTruncated>false</IsTruncated></ListBucketResult>`)
			return
		}
		gets[r.URL.Path]++
		body, ok := objects[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`)
			return
		}
		io.WriteString(w, body)
	}))
	defer srv.Close()
	env := map[string]string{"AWS_ENDPOINT_URL": srv.URL, "AWS_ACCESS_KEY_ID": "idem", "AWS_SECRET_ACCESS_KEY": "secret"}
	s, err := S3FromEnv(func(k string) string { return env[k] }, t.TempDir())
	require.NoError(t, err)
	ctx := context.Background()
	names, err := s.List(ctx, "s3://lake/t/metadata")
	require.NoError(t, err)
	require.Equal(t, []string{"v1.metadata.json", "v2.metadata.json"}, names)
	_, err = s.Open(ctx, "s3://lake/t/metadata/version-hint.text")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "NoSuchKey")
	for _, loc := range []string{"s3://lake/t/data/a b.parquet", "s3a://lake/t/data/a b.parquet"} {
		p, err := s.Local(ctx, loc)
		require.NoError(t, err)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, "PAR1", string(b))
		require.Equal(t, ".parquet", filepath.Ext(p))
	}
	p, err := s.Local(ctx, "s3://lake/t/data/a b.parquet")
	require.NoError(t, err)
	require.FileExists(t, p)
	require.Equal(t, 2, gets["/lake/t/data/a b.parquet"], "one copy per location")
	_, err = S3FromEnv(func(string) string { return "" }, t.TempDir())
	require.NoError(t, err)
	_, err = LocalStore{}.Open(ctx, "gs://b/k")
	require.False(t, errors.Is(err, fs.ErrNotExist))
	require.ErrorContains(t, err, "gs:// is not supported yet")
}

// TestS3Credentials: the shared credentials file's profile, when the
// environment has no keys.
func TestS3Credentials(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "credentials")
	require.NoError(t, os.WriteFile(file, []byte("[default]\naws_access_key_id = A\naws_secret_access_key = B\n\n[ci]\naws_access_key_id=C\naws_secret_access_key=D\naws_session_token = E\n"), 0o600))
	env := map[string]string{"AWS_SHARED_CREDENTIALS_FILE": file, "AWS_PROFILE": "ci", "AWS_DEFAULT_REGION": "eu-west-3"}
	s, err := S3FromEnv(func(k string) string { return env[k] }, "")
	require.NoError(t, err)
	require.Equal(t, []string{"C", "D", "E", "eu-west-3"}, []string{s.AccessKey, s.SecretKey, s.SessionToken, s.Region})
}
