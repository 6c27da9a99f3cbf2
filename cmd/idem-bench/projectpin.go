package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// pinCost prints, for each model of the project and each job it reads,
// what pinning that upstream costs on one DuckDB thread: the statement a
// run executes before it decides (source.relation: a temp table of the
// upstream's target in ORDER BY ALL order), and the same copy without the
// sort, each the median of reps, in CPU of the calling thread (DuckDB runs a
// statement on the thread that calls it when threads = 1). conn must be a
// connection of a database opened with threads = 1.
//
//	idem-bench child project-pin --db COPY_OF_THE_PROJECT_DATABASE --threads 1
func pinCost(ctx context.Context, conn *sql.Conn, reps int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	timed := func(q string) (time.Duration, error) {
		var cpu []time.Duration
		for range reps {
			before := threadCPU()
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return 0, err
			}
			cpu = append(cpu, threadCPU()-before)
		}
		slices.Sort(cpu)
		return cpu[len(cpu)/2], nil
	}
	var sorted, copied time.Duration
	fmt.Printf("%-18s %-16s %8s %10s %10s\n", "model", "upstream", "rows", "pin ms", "copy ms")
	for _, m := range projModelList {
		_, ups, err := modelSQL(m.name)
		if err != nil {
			return err
		}
		for _, u := range ups {
			var n int64
			if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM main."+u).Scan(&n); err != nil {
				return err
			}
			pin, err := timed("CREATE OR REPLACE TEMP TABLE pin AS SELECT * FROM (SELECT * FROM main." + u + ") ORDER BY ALL")
			if err != nil {
				return err
			}
			cp, err := timed("CREATE OR REPLACE TEMP TABLE pin AS SELECT * FROM main." + u)
			if err != nil {
				return err
			}
			sorted, copied = sorted+pin, copied+cp
			fmt.Printf("%-18s %-16s %8d %10.1f %10.1f\n", m.name, u, n, ms(pin), ms(cp))
		}
	}
	fmt.Printf("%-18s %-16s %8s %10.1f %10.1f\n", "all models", "", "", ms(sorted), ms(copied))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// threadCPU is the calling thread's user + system CPU time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		fmt.Fprintln(os.Stderr, "getrusage:", err)
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
