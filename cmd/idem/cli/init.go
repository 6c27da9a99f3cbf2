package cli

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newInitCmd() *cobra.Command {
	var name, mode string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: "Scaffold a new apply or refresh pipeline folder and a job file that runs it, or a model",
		Long: `Scaffold a new pipeline in DIR: DIR/NAME/ (pipeline.toml,
transform/v1/01_stage.sql .. 04_commit.sql, schema/v1.sql), DIR/NAME.toml
(a job that runs it) and an example input. NAME defaults to DIR's base name.

--mode apply (the default) writes an apply pipeline in the style of the
built-in merge_by_key: upsert by id, the highest updated_at wins, and a job
that applies every new file of DIR/landing/ (example.jsonl), one batch per
file. --mode refresh writes a refresh pipeline: each run replaces the
target with the whole input (DIR/input/example.csv), its commit step
clearing the target first, with a min_score param.

--mode select writes a model instead of a pipeline: DIR/NAME.toml
(pipeline = "select") runs the one SELECT in DIR/models/NAME/v1.sql over
the job it reads as an upstream, DIR/NAME_source.toml (merge_by_key of
DIR/input/NAME.csv). Run both, in order, with idem run DIR.
DIR/tests/NAME.toml holds unit tests of the model: idem test DIR runs
them without a database.

The database goes to DIR/data/, created by the first run. Nothing is
overwritten. Then: idem run DIR/NAME.toml (paths in a job file are read
from its folder).`,
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
			written, err := runner.Init(dir, name, mode)
			if err != nil {
				return a.fail(jsonOut, err)
			}
			if jsonOut {
				return a.printJSON(map[string]any{"pipeline": name, "mode": mode, "dir": dir, "files": written})
			}
			for _, w := range written {
				fmt.Fprintf(a.stdout, "wrote %s\n", w)
			}
			next := filepath.Join(dir, name+".toml")
			if mode == runner.ModeSelect {
				next = dir // the model and its source job, in order
			}
			fmt.Fprintf(a.stdout, "next: idem run %s\n", next)
			if mode == runner.ModeSelect {
				fmt.Fprintf(a.stdout, "test: idem test %s\n", dir)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "pipeline", "", "pipeline (and job and table) name; default: DIR's base name")
	cmd.Flags().StringVar(&mode, "mode", runner.ModeApply, "apply (change batches from a landing folder), refresh (the whole input replaces the target) or select (a model: one SELECT over a source job)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}
