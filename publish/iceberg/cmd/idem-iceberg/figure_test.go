package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPublishMillionRowsFigure (IDEM_BENCH=1) measures publishing one
// snapshot of 1,000,000 rows to an s3:// warehouse on the SeaweedFS server
// (and to a local file:// one) against writing the same snapshot as
// Parquet with idem export: the median of three runs of each, a fresh
// table each time. A figure for docs/benchmarks.md, not a check.
func TestPublishMillionRowsFigure(t *testing.T) {
	if os.Getenv("IDEM_BENCH") == "" {
		t.Skip("a figure, not a check: set IDEM_BENCH=1")
	}
	p := newProject(t, "")
	wh := p.useS3() + "/wh"
	p.bigJob(`'customer-' || (i % 50000) AS name, ((i * 7919) % 1000000) / 100 AS amount,
		TIMESTAMP '2026-01-01' + to_seconds(i) AS at FROM range(1000000) r(i)`, "name = \"VARCHAR\"\namount = \"DECIMAL(12,2)\"\nat = \"TIMESTAMP\"")
	r := p.run(idemCore, "run", "big.toml") // commits; the core does not publish
	require.Equal(t, 0, r.code, r.stderr)
	job, err := os.ReadFile(filepath.Join(p.dir, "big.toml"))
	require.NoError(t, err)
	median := func(what string, f func(i int)) time.Duration {
		var ds []time.Duration
		for i := range 3 {
			start := time.Now()
			f(i)
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		t.Logf("%-40s median %.2fs (runs %v)", what, ds[1].Seconds(), ds)
		return ds[1]
	}
	median("idem export --out big.parquet", func(i int) {
		p.ok(idemCore, "export", "big.toml", "--out", "export.parquet")
	})
	st, err := os.Stat(filepath.Join(p.dir, "export.parquet"))
	require.NoError(t, err)
	t.Logf("export: %d bytes", st.Size())
	for _, target := range []struct{ name, warehouse string }{{"s3:// (SeaweedFS, 127.0.0.1)", wh}, {"file://", "file://" + p.lake}} {
		median("idem-iceberg publish to "+target.name, func(i int) {
			text := strings.Replace(string(job), `namespace = "analytics"`, `namespace = "ns`+strings.ReplaceAll(target.name[:2], ":", "")+string(rune('a'+i))+`"`, 1)
			p.write("big.toml", strings.Replace(text, "file://"+p.lake, target.warehouse, 1))
			rep := p.publish("big.toml")
			require.Len(t, rep.Published, 1)
			if i == 0 {
				t.Logf("published: %d file(s), %d bytes", rep.Published[0].Files, rep.Published[0].Bytes)
			}
		})
	}
}
