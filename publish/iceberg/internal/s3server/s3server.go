// Package s3server runs a real S3-compatible server for the tests of this
// module: SeaweedFS (github.com/seaweedfs/seaweedfs, Apache-2.0), its
// `weed server -s3` (master, volume, filer and S3 gateway in one process)
// on 127.0.0.1 with a temporary data folder. The weed binary is built from
// the tools module in ./weed (its own go.mod, so that this module does not
// carry SeaweedFS's dependencies) once per version, into the user's cache
// folder; the first build takes minutes, later ones none.
//
// It replaces gofakes3, an in-memory fake the tests used before: the
// tests that publish to and read from object storage run against this
// real server.
package s3server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// The credentials of the server's admin identity, and its bucket.
const (
	AccessKey = "idem"
	SecretKey = "idem-test-secret-key"
	Bucket    = "idem"
	Region    = "us-east-1"
)

// Server is a running SeaweedFS S3 gateway.
type Server struct {
	// Endpoint is the S3 API's URL, http://127.0.0.1:PORT.
	Endpoint string
	cmd      *exec.Cmd
	done     chan error
	log      string
}

// toolsDir is the folder of the tools module that builds weed.
func toolsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "weed")
}

// Build builds weed from the tools module into the user's cache folder,
// named after the module's go.sum, and returns its path; a binary already
// there is reused. IDEM_WEED, when set, names the binary to use instead
// (.ci/run builds it before the tests, outside their timeout).
func Build(ctx context.Context) (string, error) {
	if bin := os.Getenv("IDEM_WEED"); bin != "" {
		return bin, nil
	}
	sum, err := os.ReadFile(filepath.Join(toolsDir(), "go.sum"))
	if err != nil {
		return "", fmt.Errorf("read the SeaweedFS tools module: %w", err)
	}
	h := sha256.Sum256(sum)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "idem-test", "weed-"+hex.EncodeToString(h[:6]))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	tmp := bin + ".build-" + strconv.Itoa(os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "github.com/seaweedfs/seaweedfs/weed")
	cmd.Dir = toolsDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build SeaweedFS's weed: %w\n%s", err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// freePorts reserves n distinct free TCP ports on 127.0.0.1 and releases
// them for the server to take.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// Start runs weed with its data under dir, waits until its S3 API serves
// Bucket, and returns it. Its log goes to dir/weed.log.
func Start(ctx context.Context, bin, dir string) (*Server, error) {
	// weed derives no port from another when each is given: http and gRPC
	// ports of the master, volume server, filer and S3 gateway.
	p, err := freePorts(8)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "weed.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		"-master.port=" + strconv.Itoa(p[0]), "-master.port.grpc=" + strconv.Itoa(p[1]),
		"-volume.port=" + strconv.Itoa(p[2]), "-volume.port.grpc=" + strconv.Itoa(p[3]),
		"-filer", "-filer.port=" + strconv.Itoa(p[4]), "-filer.port.grpc=" + strconv.Itoa(p[5]),
		"-s3", "-s3.port=" + strconv.Itoa(p[6]), "-s3.port.grpc=" + strconv.Itoa(p[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
		"-master.volumeSizeLimitMB=64", "-volume.max=16"}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+AccessKey, "AWS_SECRET_ACCESS_KEY="+SecretKey)
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, dir
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start weed: %w", err)
	}
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(p[6]), cmd: cmd, done: make(chan error, 1), log: logPath}
	go func() { s.done <- cmd.Wait() }()
	if err := s.waitBucket(ctx); err != nil {
		s.Stop()
		out, _ := os.ReadFile(logPath)
		if len(out) > 4000 {
			out = out[len(out)-4000:]
		}
		return nil, fmt.Errorf("weed server: %w; its log ends:\n%s", err, out)
	}
	return s, nil
}

// waitBucket creates Bucket once the S3 API answers, within a minute.
func (s *Server) waitBucket(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			return fmt.Errorf("exited: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		_, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(Bucket)})
		var owned *types.BucketAlreadyOwnedByYou
		if err == nil || errors.As(err, &owned) {
			return nil
		}
		last = err
	}
	return fmt.Errorf("no S3 API at %s after a minute: %w", s.Endpoint, last)
}

// Env is the environment the AWS SDKs (and idem's reader) read to reach
// the server.
func (s *Server) Env() []string {
	return []string{"AWS_ENDPOINT_URL_S3=" + s.Endpoint, "AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey}
}

// Stop ends the server and waits for it.
func (s *Server) Stop() {
	if s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Shared is the one server of a test binary, started on first use.
type Shared struct {
	once sync.Once
	srv  *Server
	dir  string
	err  error
}

// Get returns the shared server, starting it on first use. When weed
// cannot be built or started the test is skipped, unless CI is set: then
// it fails.
func (sh *Shared) Get(t testing.TB) *Server {
	t.Helper()
	sh.once.Do(func() {
		start := time.Now()
		bin, err := Build(context.Background())
		if err != nil {
			sh.err = err
			return
		}
		if sh.dir, sh.err = os.MkdirTemp("", "idem-s3server-"); sh.err != nil {
			return
		}
		sh.srv, sh.err = Start(context.Background(), bin, sh.dir)
		if testing.Verbose() && sh.err == nil {
			fmt.Fprintf(os.Stderr, "s3server: SeaweedFS S3 at %s, ready in %.1fs\n", sh.srv.Endpoint, time.Since(start).Seconds())
		}
	})
	if sh.err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("a real S3-compatible server (SeaweedFS) is needed with CI set: %v", sh.err)
		}
		t.Skipf("no real S3-compatible server (SeaweedFS could not be built or started; CI would fail): %v", sh.err)
	}
	return sh.srv
}

// Stop stops the shared server, if it was started, and removes its data.
func (sh *Shared) Stop() {
	if sh.srv != nil {
		sh.srv.Stop()
	}
	if sh.dir != "" {
		os.RemoveAll(sh.dir)
	}
}

// Client is an S3 client of the server (path-style, the admin identity).
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{Region: Region, BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
}
