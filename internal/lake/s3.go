package lake

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// S3 reads the objects of s3:// locations (s3a:// and s3n://, as Spark
// writes them, too) from Amazon S3 or an S3-compatible server: GET and
// ListObjectsV2 requests signed with AWS Signature Version 4. It is the
// core's own small client: the core binary carries no AWS SDK (the
// publisher, in the publish/iceberg module, uses iceberg-go's).
type S3 struct {
	// Endpoint is the URL of an S3-compatible server, addressed path-style
	// (ENDPOINT/BUCKET/KEY); empty is Amazon S3 (https://BUCKET.s3.REGION.amazonaws.com).
	Endpoint string
	Region   string
	// AccessKey, SecretKey and SessionToken sign the requests; with no
	// AccessKey they are sent unsigned (a public bucket).
	AccessKey, SecretKey, SessionToken string
	// Dir is where Local copies objects for DuckDB to read.
	Dir    string
	Client *http.Client
	now    func() time.Time
}

// S3FromEnv configures an S3 client as the AWS SDKs read the environment:
// AWS_ENDPOINT_URL_S3 (else AWS_ENDPOINT_URL), AWS_REGION (else
// AWS_DEFAULT_REGION, else us-east-1), AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else the profile
// AWS_PROFILE (else default) of the shared credentials file
// (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials). Objects are
// copied to dir.
func S3FromEnv(getenv func(string) string, dir string) (*S3, error) {
	s := &S3{Dir: dir, Client: &http.Client{}, Region: "us-east-1"}
	s.Endpoint = firstEnv(getenv, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	if r := firstEnv(getenv, "AWS_REGION", "AWS_DEFAULT_REGION"); r != "" {
		s.Region = r
	}
	s.AccessKey, s.SecretKey, s.SessionToken = getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"), getenv("AWS_SESSION_TOKEN")
	if s.AccessKey != "" {
		return s, nil
	}
	file := getenv("AWS_SHARED_CREDENTIALS_FILE")
	if file == "" {
		home := getenv("HOME")
		if home == "" {
			return s, nil
		}
		file = filepath.Join(home, ".aws", "credentials")
	}
	profile := firstEnv(getenv, "AWS_PROFILE")
	if profile == "" {
		profile = "default"
	}
	vals, err := iniSection(file, profile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s, nil
		}
		return nil, fmt.Errorf("read AWS credentials %s: %w", file, err)
	}
	s.AccessKey, s.SecretKey, s.SessionToken = vals["aws_access_key_id"], vals["aws_secret_access_key"], vals["aws_session_token"]
	return s, nil
}

func firstEnv(getenv func(string) string, keys ...string) string {
	for _, k := range keys {
		if v := getenv(k); v != "" {
			return v
		}
	}
	return ""
}

// iniSection reads the keys of [section] of an AWS shared credentials file.
func iniSection(file, section string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vals, in := map[string]string{}, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			in = strings.TrimSpace(strings.Trim(line, "[]")) == section
		case in:
			if k, v, ok := strings.Cut(line, "="); ok {
				vals[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
	}
	return vals, sc.Err()
}

// isS3 says location is an object of S3.
func isS3(location string) bool {
	for _, p := range []string{"s3://", "s3a://", "s3n://"} {
		if strings.HasPrefix(location, p) {
			return true
		}
	}
	return false
}

// splitS3 is the bucket and key of an s3:// location.
func splitS3(location string) (bucket, key string, err error) {
	_, rest, _ := strings.Cut(location, "://")
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("iceberg location %s: no bucket", location)
	}
	return bucket, key, nil
}

// Open reads the object at location; a missing object's error wraps
// fs.ErrNotExist.
func (s *S3) Open(ctx context.Context, location string) (io.ReadCloser, error) {
	bucket, key, err := splitS3(location)
	if err != nil {
		return nil, err
	}
	resp, err := s.do(ctx, bucket, key, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", location, err)
	}
	return resp.Body, nil
}

// Local copies the object at location into s.Dir (once per location) and
// returns the copy's path. The copy is written to a temporary name and
// renamed, so a reader killed mid-copy leaves no partial file under the
// name.
func (s *S3) Local(ctx context.Context, location string) (string, error) {
	sum := sha256.Sum256([]byte(location))
	p := filepath.Join(s.Dir, hex.EncodeToString(sum[:16])+filepath.Ext(location))
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return "", err
	}
	body, err := s.Open(ctx, location)
	if err != nil {
		return "", err
	}
	defer body.Close()
	f, err := os.CreateTemp(s.Dir, "part-*")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("copy %s: %w", location, err)
	}
	return p, nil
}

// List names the objects directly under the folder location.
func (s *S3) List(ctx context.Context, location string) ([]string, error) {
	bucket, prefix, err := splitS3(location)
	if err != nil {
		return nil, err
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	var names []string
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {prefix}, "delimiter": {"/"}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		resp, err := s.do(ctx, bucket, "", q)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", location, err)
		}
		var page struct {
			Contents  []struct{ Key string }
			Truncated bool   `xml:"IsTruncated"`
			Next      string `xml:"NextContinuationToken"`
		}
		err = xml.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", location, err)
		}
		for _, c := range page.Contents {
			if n := strings.TrimPrefix(c.Key, prefix); n != "" && !strings.Contains(n, "/") {
				names = append(names, n)
			}
		}
		if !page.Truncated || page.Next == "" {
			return names, nil
		}
		token = page.Next
	}
}

// do sends a signed GET of key (or of the bucket, with query q) and
// returns a 200 response; other statuses are errors naming the server's
// code (a 404 wraps fs.ErrNotExist).
func (s *S3) do(ctx context.Context, bucket, key string, q url.Values) (*http.Response, error) {
	var u *url.URL
	if s.Endpoint != "" {
		base, err := url.Parse(s.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("S3 endpoint %s: %w", s.Endpoint, err)
		}
		u = &url.URL{Scheme: base.Scheme, Host: base.Host, Path: strings.TrimSuffix(base.Path, "/") + "/" + bucket + "/" + key}
	} else {
		u = &url.URL{Scheme: "https", Host: bucket + ".s3." + s.Region + ".amazonaws.com", Path: "/" + key}
	}
	u.RawPath = uriEncode(u.Path, false)
	u.RawQuery = canonicalQuery(q)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	s.sign(req, u)
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	var e struct{ Code, Message string }
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = xml.Unmarshal(body, &e)
	err = fmt.Errorf("S3 %s %s: %s %s", resp.Status, u.Redacted(), e.Code, e.Message)
	if resp.StatusCode == http.StatusNotFound {
		err = fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return nil, err
}

// emptySHA256 is the payload hash of a request without a body.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// sign adds the AWS Signature Version 4 headers to req (a GET of u
// without a body).
func (s *S3) sign(req *http.Request, u *url.URL) {
	if s.AccessKey == "" {
		return
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	t := now().UTC()
	stamp, day := t.Format("20060102T150405Z"), t.Format("20060102")
	req.Header.Set("X-Amz-Date", stamp)
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	if s.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", s.SessionToken)
	}
	headers := map[string]string{"host": u.Host, "x-amz-date": stamp, "x-amz-content-sha256": emptySHA256}
	if s.SessionToken != "" {
		headers["x-amz-security-token"] = s.SessionToken
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var canon strings.Builder
	for _, k := range names {
		canon.WriteString(k + ":" + headers[k] + "\n")
	}
	signed := strings.Join(names, ";")
	request := strings.Join([]string{req.Method, u.EscapedPath(), u.RawQuery, canon.String(), signed, emptySHA256}, "\n")
	scope := day + "/" + s.Region + "/s3/aws4_request"
	rh := sha256.Sum256([]byte(request))
	toSign := "AWS4-HMAC-SHA256\n" + stamp + "\n" + scope + "\n" + hex.EncodeToString(rh[:])
	key := []byte("AWS4" + s.SecretKey)
	for _, part := range []string{day, s.Region, "s3", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+s.AccessKey+"/"+scope+", SignedHeaders="+signed+", Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// canonicalQuery is q in SigV4's canonical form: keys sorted, keys and
// values URI-encoded.
func canonicalQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		for _, v := range q[k] {
			parts = append(parts, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	return strings.Join(parts, "&")
}

// uriEncode encodes s as SigV4 does: every byte but A-Z a-z 0-9 - _ . ~
// as %XX, and '/' too when slash.
func uriEncode(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !slash:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
