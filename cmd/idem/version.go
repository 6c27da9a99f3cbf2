package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/runner"
)

func (a *app) newVersionCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print idem's version and the DuckDB it bundles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			duck, err := runner.DuckDBVersion(cmd.Context())
			if err != nil {
				return a.fail(jsonOut, err)
			}
			if jsonOut {
				return a.printJSON(map[string]any{"idem": version, "duckdb": duck, "go": runtime.Version()})
			}
			fmt.Fprintf(a.stdout, "idem %s (DuckDB %s, %s)\n", version, duck, runtime.Version())
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}
