// Command idemprof is idem's command line run in-process under Go's CPU
// profiler, to see where a run's CPU goes (docs/benchmarks.md, "The
// project case"). DuckDB's work on the calling goroutine's thread (every
// step of a job holding user SQL runs on one thread) is charged to the Go
// call that entered it; work on DuckDB's own threads shows as
// runtime._ExternalCode.
//
//	go build -tags idembench -o idemprof ./cmd/idem-bench/idemprof
//	IDEM_CPUPROFILE=run.pprof IDEM_CPUPROFILE_HZ=500 ./idemprof run DIR --quiet
//	go tool pprof -top -cum idemprof run.pprof
//
// Without IDEM_CPUPROFILE it is idem.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"

	"github.com/idem-dev/idem/cmd/idem/cli"
)

func main() {
	path := os.Getenv("IDEM_CPUPROFILE")
	if path == "" {
		os.Exit(cli.Run())
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "idemprof:", err)
		os.Exit(1)
	}
	if hz, err := strconv.Atoi(os.Getenv("IDEM_CPUPROFILE_HZ")); err == nil && hz > 0 {
		// Set before StartCPUProfile, which then keeps this rate (and
		// prints that it cannot set its own).
		runtime.SetCPUProfileRate(hz)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "idemprof:", err)
		os.Exit(1)
	}
	code := cli.Run()
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "idemprof:", err)
		os.Exit(1)
	}
	os.Exit(code)
}
