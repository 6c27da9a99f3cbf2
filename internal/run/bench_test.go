package run

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"

	"github.com/idem-dev/idem/pipelines"
)

// Benchmarks of hot runner paths. CI compiles them (go test -bench '^$');
// run them with: go test ./internal/run -run '^$' -bench . -benchtime 5x

// BenchmarkHashFile is the cost of hashing a 64 MiB input, the floor of a
// no-op re-run.
func BenchmarkHashFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "input.bin")
	data := make([]byte, 64<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := source.HashFile(context.Background(), path, int64(len(data)), report.Progress{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunUpToDate is open + run + close of the small sample job when
// its key is unchanged: the fixed cost of every idem run.
func BenchmarkRunUpToDate(b *testing.B) {
	ctx := context.Background()
	j, err := LoadJob("../../configs/sample.toml", pipelines.FS)
	if err != nil {
		b.Fatal(err)
	}
	j.Input.Path = "../../" + j.Input.Path
	path := filepath.Join(b.TempDir(), "bench.duckdb")
	run := func() string {
		db, err := Open(ctx, path, OpenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		res, err := db.Run(ctx, j, RunOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return res.Decision
	}
	if d := run(); d != report.DecisionLoaded {
		b.Fatalf("first run: %s", d)
	}
	b.ResetTimer()
	for b.Loop() {
		if d := run(); d != report.DecisionSkipped {
			b.Fatalf("re-run: %s", d)
		}
	}
}
