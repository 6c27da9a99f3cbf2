package cli

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"
)

// projectFlags are the flags of run and plan over a project.
type projectFlags struct {
	selects  []string
	excludes []string
	jobs     int
	verbose  bool
}

func (p *projectFlags) register(cmd *cobra.Command, concurrency bool) {
	cmd.Flags().StringArrayVar(&p.selects, "select", nil, "run only the jobs `SEL` picks: NAME, tag:TAG, path:PATH or state:modified; SEL+ / SEL+N with everything / N generations downstream, +SEL / N+SEL upstream, @SEL, A,B to intersect, space-separated to add up; repeatable (forms above)")
	cmd.Flags().StringArrayVar(&p.excludes, "exclude", nil, "leave out the jobs `SEL` picks (the forms of --select), after every --select; repeatable")
	if concurrency {
		cmd.Flags().IntVar(&p.jobs, "jobs", runtime.NumCPU(), "run jobs whose upstreams are done at once, at most `N` at a time (default: the cores); output is printed in run order")
	}
	cmd.Flags().BoolVarP(&p.verbose, "verbose", "v", false, "name on stderr the *.toml files of a folder that are not job files, which are not read")
}

// isProject says whether a run or plan is over a project: several paths,
// a folder, or a --select. One job file runs as it always has.
func (p *projectFlags) isProject(args []string) bool {
	if len(args) != 1 || len(p.selects) > 0 || len(p.excludes) > 0 {
		return true
	}
	st, err := os.Stat(args[0])
	return err == nil && st.IsDir()
}

// oneJobFlags are the flags of run and plan that name one batch of one
// job; a project refuses them.
var oneJobFlags = []string{"input", "batch-id", "from", "to", "epoch", "expect-parent"}

// oneJobFlag refuses, over a project, a flag that names one batch of one
// job.
func oneJobFlag(cmd *cobra.Command) error {
	for _, name := range oneJobFlags {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			return &report.UsageError{Msg: fmt.Sprintf("--%s names one batch of one job: give one job file, not a project", name)}
		}
	}
	return nil
}

// notJobFile says, under --verbose, that a *.toml file of a folder is not
// read.
func (a *app) notJobFile(file string) {
	fmt.Fprintf(a.stderr, "idem: %s is not a job file (no top-level pipeline =): not read\n", file)
}

// pickedNone says that --select and --exclude left no job.
func (p *projectFlags) pickedNone(a *app) {
	var sel []string
	if len(p.selects) > 0 {
		sel = append(sel, "--select "+strings.Join(p.selects, " "))
	}
	if len(p.excludes) > 0 {
		sel = append(sel, "--exclude "+strings.Join(p.excludes, " "))
	}
	fmt.Fprintf(a.stderr, "idem: %s picks no job: nothing to do\n", strings.Join(sel, " "))
}

// options are the runner options of the project flags.
func (p *projectFlags) options(a *app) []runner.Option {
	var opts []runner.Option
	if len(p.selects) > 0 {
		opts = append(opts, runner.WithSelect(p.selects...))
	}
	if len(p.excludes) > 0 {
		opts = append(opts, runner.WithExclude(p.excludes...))
	}
	if p.jobs > 0 {
		opts = append(opts, runner.WithConcurrency(p.jobs))
	}
	if p.verbose {
		opts = append(opts, runner.WithSkippedFiles(a.notJobFile))
	}
	return opts
}
