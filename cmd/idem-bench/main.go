// Command idem-bench measures idem against the floor: the same work as one
// hand-written SQL script through duckdb-go in one transaction. Every
// measurement is a whole child process (idem, or this program re-executed as
// the floor), so wall time and peak RSS (from wait4's rusage) compare like
// with like. Runs alternate between idem and the floor, several repetitions,
// each from a fresh copy of the same prepared database.
//
//	go run ./cmd/idem-bench -n 1000000
//	go run ./cmd/idem-bench -n 10000000 -limits none,2GB -cases apply
//	IDEM_BENCH_ROWS=10000000 go run ./cmd/idem-bench -cases history
//	go run ./cmd/idem-bench -n 10000000 -cases incremental,noop-project
//	go run ./cmd/idem-bench -n 2000000 -reps 3 -cases env
//	go run ./cmd/idem-bench -n 1000000 -reps 3 -cases jsonl
//	go run ./cmd/idem-bench -reps 5 -cases project
//
// It is not run in CI.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "child" {
		if err := child(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "idem-bench child:", err)
			os.Exit(1)
		}
		return
	}
	var b bench
	rows := int64(1_000_000)
	if v := os.Getenv("IDEM_BENCH_ROWS"); v != "" {
		if _, err := fmt.Sscan(v, &rows); err != nil {
			fmt.Fprintln(os.Stderr, "idem-bench: IDEM_BENCH_ROWS:", err)
			os.Exit(2)
		}
	}
	flag.Int64Var(&b.n, "n", rows, "rows of the synthetic batch and stored entities (default: IDEM_BENCH_ROWS, else 1000000)")
	flag.IntVar(&b.reps, "reps", 3, "repetitions of each measurement")
	limits := flag.String("limits", "none,2GB", "comma-separated memory limits to run apply and refresh under (none = DuckDB's default)")
	cases := flag.String("cases", "apply,refresh,noop,uptodate,export", "comma-separated cases to run (also: history, incremental, noop-project, env, jsonl, project, stream)")
	flag.StringVar(&b.dir, "dir", filepath.Join(os.TempDir(), "idem-bench"), "work folder (generated inputs are kept and reused)")
	flag.Int64Var(&b.noopBytes, "noop-bytes", 1<<30, "size of the no-op re-run's input")
	flag.Int64Var(&b.projectOrders, "project-orders", 60000, "project case: orders over its twelve months (about 2.5 items each)")
	flag.IntVar(&b.projectThreads, "project-threads", 0, "project case: DuckDB threads of idem (--threads) and the floor (0: DuckDB's default, the cores)")
	flag.StringVar(&b.projectBatch, "project-batch", "", "project case: the monthly sources' [input] batch, per_file or all (default: idem's, per_file)")
	flag.IntVar(&b.applyTransform, "apply-transform", 2, "apply and history cases: transform_version of the versioned_changes job (1: the released v1)")
	flag.IntVar(&b.streamTransform, "stream-transform", 2, "stream case: transform_version of the versioned_changes jobs, both sides (1: the released v1)")
	flag.StringVar(&b.idem, "idem", "", "idem binary (default: go build -tags idembench ./cmd/idem into the work folder; the history case needs that tag)")
	flag.Parse()
	b.limits = strings.Split(*limits, ",")
	if err := b.run(ctx, strings.Split(*cases, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "idem-bench:", err)
		os.Exit(1)
	}
}
