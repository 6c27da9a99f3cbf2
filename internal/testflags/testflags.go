// Package testflags holds the defaults the test packages of idem share.
// It is imported only by tests.
package testflags

import (
	"flag"
	"runtime"
	"strconv"
)

// DefaultParallel sets go test's -parallel, when it was not given, to half
// of GOMAXPROCS (at least 1), and returns the value in force. It is called
// from a TestMain before m.Run, after flag.Parse.
//
// The tests of the heavy packages each drive a DuckDB with one thread, and
// go test ./... already runs GOMAXPROCS packages at once: with -parallel at
// its default, GOMAXPROCS, a 2-core machine runs four databases at once,
// which only queue on the CPU and, measured on one, cost a fifth more CPU
// in all. With half, the packages running side by side fill the machine.
// Give -parallel to run a single package faster.
func DefaultParallel() int {
	return setParallel(max(1, runtime.GOMAXPROCS(0)/2))
}

// WaitingParallel sets -parallel, when it was not given, to GOMAXPROCS,
// and returns the value in force. It is for a package whose tests spend
// most of their time waiting rather than computing: for a broker's
// max_wait, a follower's batch interval, a child process held at a fault
// point. Measured on a 2-core machine, the stream tests took 61 s of wall
// for 32 CPU-seconds with -parallel 1: half of the package's slot in go
// test ./... was idle.
func WaitingParallel() int {
	return setParallel(max(1, runtime.GOMAXPROCS(0)))
}

// setParallel sets -parallel to n unless the command line gave it.
func setParallel(n int) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err) // only when the testing package's flags are not registered
		}
	}
	f := flag.Lookup("test.parallel")
	if f == nil {
		return 0
	}
	n, _ = strconv.Atoi(f.Value.String())
	return n
}
