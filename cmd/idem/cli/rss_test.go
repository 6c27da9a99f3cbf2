package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestChunkedBackfillPeakRSS measures the peak RSS of a chunked backfill of
// a generated Parquet input with the built binary under /usr/bin/time -v.
// It is not part of the normal run: set IDEM_RSS to the row counts, e.g.
// IDEM_RSS=1000000,10000000 (IDEM_RSS_CHUNK for chunk_rows, default
// 100000; IDEM_RSS_MEMORY for [duckdb] memory_limit, default none).
func TestChunkedBackfillPeakRSS(t *testing.T) {
	sizes := os.Getenv("IDEM_RSS")
	if sizes == "" {
		t.Skip("set IDEM_RSS=1000000,10000000 to measure")
	}
	chunk := os.Getenv("IDEM_RSS_CHUNK")
	if chunk == "" {
		chunk = "100000"
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "idem")
	build := exec.Command("go", "build", "-o", bin, "..") // ../ is cmd/idem, package main
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	maxRSS := regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`)
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		require.NoError(t, err)
		run := filepath.Join(dir, s)
		require.NoError(t, os.MkdirAll(run, 0o755))
		makeParquet(t, filepath.Join(run, "big.parquet"), n, 122880)
		rows, _ := strconv.Atoi(chunk)
		text := chunkJob(run, rows)
		if m := os.Getenv("IDEM_RSS_MEMORY"); m != "" {
			text += fmt.Sprintf("\n[duckdb]\nmemory_limit = %q\n", m)
		}
		clitest.WriteFile(t, filepath.Join(run, "job.toml"), text)
		cmd := exec.Command("/usr/bin/time", "-v", bin, "run", filepath.Join(run, "job.toml"), "--json")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		require.NoError(t, cmd.Run(), stderr.String())
		m := maxRSS.FindStringSubmatch(stderr.String())
		require.NotNil(t, m, stderr.String())
		kb, _ := strconv.Atoi(m[1])
		counts := clitest.QueryInts(t, filepath.Join(run, "test.duckdb"), `SELECT count(*) FROM backfill UNION ALL SELECT count(*) FROM idem.ledger ORDER BY 1 DESC`)
		require.Equal(t, int64(n), counts[0])
		t.Logf("rows %d chunk_rows %s: peak RSS %.0f MB, %d chunks, %s", n, chunk, float64(kb)/1024, counts[1], time.Since(start).Round(time.Second))
		require.NoError(t, os.RemoveAll(run))
	}
}
