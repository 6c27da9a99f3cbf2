package export_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/idem-dev/idem/internal/job"

	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/pipelines"
)

// benchOrders builds an orders database of IDEM_BENCH_ROWS rows (default
// 1,000,000) in dir and returns it open with its job.
func benchOrders(b *testing.B, dir string) (*run.DB, *job.Job) {
	b.Helper()
	n := 1_000_000
	if s := os.Getenv("IDEM_BENCH_ROWS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	input := filepath.Join(dir, "orders.jsonl")
	f, err := os.Create(input)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range n {
		fmt.Fprintf(w, `{"order_id":"o-%09d","position":%d,"kind":"upsert","amount_cents":%d,"event_day":%d,"schema_version":3,"currency":"%s"}`+"\n",
			(i*7919)%n, i+1, i%100000, 40+i%30, []string{"EUR", "USD", "INR"}[i%3])
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	jobFile := filepath.Join(dir, "orders.toml")
	if err := os.WriteFile(jobFile, []byte("name = \"orders\"\npipeline = \"orders\"\ntransform_version = 1\nschema_version = 1\n[input]\npath = \""+input+"\"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	j, err := run.LoadJob(jobFile, pipelines.FS)
	if err != nil {
		b.Fatal(err)
	}
	db, err := run.Open(context.Background(), filepath.Join(dir, "idem.duckdb"), run.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Run(context.Background(), j, run.RunOptions{}); err != nil {
		b.Fatal(err)
	}
	return db, j
}

// BenchmarkExport compares idem export of the latest snapshot with a raw
// COPY of the target in key order, per format. Not run in CI; the target is
// at most 1.1x the raw COPY:
//
//	IDEM_BENCH_ROWS=2000000 go test ./internal/export -run '^$' -bench Export -benchtime 3x
func BenchmarkExport(b *testing.B) {
	dir := b.TempDir()
	db, j := benchOrders(b, dir)
	defer db.Close()
	ctx := context.Background()
	for _, format := range []string{"csv", "parquet"} {
		out := filepath.Join(dir, "out."+format)
		b.Run(format+"/idem", func(b *testing.B) {
			for b.Loop() {
				if _, err := export.Export(ctx, db, j, export.Options{Out: out, Format: format}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(format+"/raw-copy", func(b *testing.B) {
			for b.Loop() {
				if _, err := db.SQL().ExecContext(ctx, "COPY (SELECT * FROM orders ORDER BY order_id) TO '"+out+"' (FORMAT "+format+")"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
