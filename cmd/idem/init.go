package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/runner"
)

func (a *app) newInitCmd() *cobra.Command {
	var name string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: "Scaffold a new pipeline folder and a job file that runs it",
		Long: `Scaffold a new apply pipeline in DIR, in the style of the built-in
merge_by_key: DIR/NAME/ (pipeline.toml, transform/v1/01_stage.sql ..
04_commit.sql, schema/v1.sql), DIR/NAME.toml (a job that applies every new
file of DIR/landing/, one batch per file), DIR/landing/example.jsonl and
DIR/data/. NAME defaults to DIR's base name. Nothing is overwritten.
Then: cd DIR && idem run NAME.toml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if name == "" {
				abs, err := filepath.Abs(dir)
				if err != nil {
					return a.fail(jsonOut, err)
				}
				name = strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9_]`).ReplaceAllString(filepath.Base(abs), "_"))
			}
			written, err := runner.Scaffold(dir, name)
			if err != nil {
				return a.fail(jsonOut, err)
			}
			if jsonOut {
				return a.printJSON(map[string]any{"pipeline": name, "dir": dir, "files": written})
			}
			for _, w := range written {
				fmt.Fprintf(a.stdout, "wrote %s\n", w)
			}
			fmt.Fprintf(a.stdout, "next: cd %s && idem run %s.toml\n", dir, name)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "pipeline", "", "pipeline (and job and table) name; default: DIR's base name")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}
