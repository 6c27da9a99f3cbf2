package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"

	"github.com/idem-dev/idem/pipelines"
)

// BenchmarkUpstreamApply is a downstream job over a 1M-row upstream (10M
// with IDEM_BENCH_ROWS=10000000) after 1% of the upstream's rows changed:
// "incremental" is merge_by_key v2 applying only the changed rows from the
// upstream's history, "full" the same rows recomputed from scratch by a
// model (SELECT of the whole upstream). Each iteration first commits a new
// 1% change to the upstream, untimed. Run with:
//
//	go test ./internal/run -run '^$' -bench BenchmarkUpstreamApply -benchtime 5x
func BenchmarkUpstreamApply(b *testing.B) {
	rows := int64(1_000_000)
	if s := os.Getenv("IDEM_BENCH_ROWS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		rows = n
	}
	for _, mode := range []string{"incremental", "full"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			write := func(name, text string) string {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					b.Fatal(err)
				}
				return path
			}
			load := func(name, text string) *job.Job {
				j, err := LoadJob(write(name, text), pipelines.FS)
				if err != nil {
					b.Fatal(err)
				}
				return j
			}
			cols := "[input.columns]\nk = \"BIGINT\"\no = \"BIGINT\"\nv = \"VARCHAR\"\n[target]\nkey = [\"k\"]\norder_by = \"o\"\n"
			up := load("up.toml", "name = \"up\"\npipeline = \"merge_by_key\"\ntransform_version = 2\nschema_version = 1\n[input]\nformat = \"parquet\"\n"+cols)
			var down *job.Job
			if mode == "incremental" {
				down = load("down.toml", "name = \"down\"\npipeline = \"merge_by_key\"\ntransform_version = 2\nschema_version = 1\n[input]\nupstream = [\"up\"]\n"+cols)
			} else {
				write("models/down/v1.sql", "SELECT k, o, v FROM {{upstream:up}}\n")
				down = load("down.toml", "name = \"down\"\npipeline = \"select\"\ntransform_version = 1\n[input]\nupstream = [\"up\"]\n[transform]\nsql = \"models/down\"\n[target]\nkey = [\"k\"]\n")
			}
			db, err := Open(ctx, filepath.Join(dir, "bench.duckdb"), OpenOptions{DuckDB: job.DuckDBSettings{Threads: 2}})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			// batch i: every row at i = 0, then every 100th row (from an
			// offset that moves) with a higher ordering value.
			batch := func(i int) {
				path := filepath.Join(dir, fmt.Sprintf("batch-%04d.parquet", i))
				q := fmt.Sprintf(`COPY (SELECT k, %d AS o, 'v' || (k * 7 + %d) %% 1000 AS v FROM range(%d) t(k)) TO '%s' (FORMAT parquet)`, i, i, rows, path)
				if i > 0 {
					q = fmt.Sprintf(`COPY (SELECT k, %d AS o, 'v' || (k * 7 + %d) %% 1000 AS v FROM range(%d, %d, 100) t(k)) TO '%s' (FORMAT parquet)`, i, i, i%100, rows, path)
				}
				if _, err := db.sql.ExecContext(ctx, q); err != nil {
					b.Fatal(err)
				}
				if _, err := db.Run(ctx, up, RunOptions{Input: path}); err != nil {
					b.Fatal(err)
				}
			}
			batch(0)
			if _, err := db.Run(ctx, down, RunOptions{}); err != nil {
				b.Fatal(err)
			}
			i := 0
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				i++
				batch(i)
				b.StartTimer()
				opts := RunOptions{}
				if os.Getenv("IDEM_BENCH_STEPS") != "" {
					opts.Progress = report.Progress{Step: func(name string) func(time.Duration) {
						return func(d time.Duration) { b.Logf("%s %s", name, d) }
					}}
				}
				res, err := db.Run(ctx, down, opts)
				if err != nil {
					b.Fatal(err)
				}
				if res.Decision == report.DecisionSkipped {
					b.Fatal("downstream skipped")
				}
			}
		})
	}
}
