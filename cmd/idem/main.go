// Command idem runs versioned SQL pipelines on an embedded DuckDB database
// so that re-running a pipeline is always safe. The commands are in
// package cli (cmd/idem/cli), one file per command.
package main

import (
	"os"

	"github.com/idem-dev/idem/cmd/idem/cli"
)

func main() {
	os.Exit(cli.Run())
}
