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
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		n := max(1, runtime.GOMAXPROCS(0)/2)
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err) // only when the testing package's flags are not registered
		}
	}
	f := flag.Lookup("test.parallel")
	if f == nil {
		return 0
	}
	n, _ := strconv.Atoi(f.Value.String())
	return n
}
