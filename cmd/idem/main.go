// Command idem runs versioned SQL pipelines on an embedded DuckDB database
// so that re-running a pipeline is always safe. The commands are in
// package cli (cmd/idem/cli), one file per command.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/idem-dev/idem/cmd/idem/cli"
)

func main() {
	os.Exit(run())
}

// run is cli.Run, under a CPU profile written to IDEM_CPUPROFILE when it
// is set (docs/benchmarks.md: where a command's CPU goes).
func run() int {
	if path := os.Getenv("IDEM_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "idem: IDEM_CPUPROFILE: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "idem: IDEM_CPUPROFILE: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	return cli.Run()
}
