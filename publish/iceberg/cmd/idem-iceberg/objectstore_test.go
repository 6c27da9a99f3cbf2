package main

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/idem-dev/idem/publish/iceberg/publisher"
	"github.com/stretchr/testify/require"
)

// The object-store tests publish to an S3 API served by
// internal/fakes3: github.com/johannesboyne/gofakes3, an in-memory FAKE
// of S3 (not a real S3-compatible server), started as a separate process
// on 127.0.0.1 and reached over HTTP through the AWS SDK as a real one.

var fakeS3 = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(filepath.Dir(idemIceberg), "fakes3")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/fakes3")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	return bin, nil
})

// startS3 starts the fake S3 with bucket and points the project's
// environment at it as the AWS SDKs read it.
func (p *project) startS3(bucket string) {
	p.t.Helper()
	bin, err := fakeS3()
	require.NoError(p.t, err)
	cmd := exec.Command(bin, bucket)
	stdin, err := cmd.StdinPipe()
	require.NoError(p.t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(p.t, err)
	cmd.Stderr = os.Stderr
	require.NoError(p.t, cmd.Start())
	p.t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(p.t, err)
	p.env = append(p.env, "AWS_ENDPOINT_URL_S3="+strings.TrimSpace(line), "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=idem", "AWS_SECRET_ACCESS_KEY=idem-test-secret")
}

// useWarehouse points the project's job files at warehouse.
func (p *project) useWarehouse(warehouse string) {
	p.t.Helper()
	for _, name := range []string{"accounts.toml", "occ.toml"} {
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
	p.startS3("lake")
	const wh = "s3://lake/warehouse"
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
