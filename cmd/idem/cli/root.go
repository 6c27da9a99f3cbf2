package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/runner"
)

// version is set at build time with -ldflags "-X github.com/idem-dev/idem/cmd/idem/cli.version=...".
var version = "dev"

// app carries what every command needs: its writers and the environment.
type app struct {
	stdout, stderr io.Writer
	// faultErr, when set, is where IDEM_FAULT's lines go (fault.go): the
	// process's stderr, also inside a project run whose jobs' stderr is
	// kept to print in run order, since a test waits for them while the
	// process is held.
	faultErr io.Writer
	getenv   func(string) string
	// ext is what the binary adds to the CLI (extension.go).
	ext Extension
	// publishErr is the first failure of ext.Hook in run: the commands'
	// commits stand, and the process exits with its code (extension.go).
	publishErr error
}

// Main runs the idem CLI with args and returns the process exit code. Tests
// call it in-process with their own writers.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return mainEnv(ctx, args, stdout, stderr, os.Getenv)
}

// CommandHasFlag reports whether the idem command that args name (for
// example "run", "x.toml") has a flag called name; false when args name no
// command. Test harnesses use it to add a flag only where it is accepted.
func CommandHasFlag(args []string, name string) bool {
	cmd, _, err := (&app{}).newRootCmd().Find(args)
	return err == nil && cmd.Flags().Lookup(name) != nil
}

// mainEnv is Main reading the environment through getenv.
func mainEnv(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return mainExt(ctx, args, stdout, stderr, getenv, Extension{})
}

// mainExt is mainEnv for a binary that extends the CLI with ext.
func mainExt(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, ext Extension) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv, ext: ext}
	root := a.newRootCmd()
	if ext.Commands != nil {
		root.AddCommand(ext.Commands(a.faultHook)...)
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil && a.publishErr != nil {
		return max(runner.ExitCode(a.publishErr), runner.ExitFailure)
	}
	if err == nil {
		return runner.ExitOK
	}
	var ce *codeError
	if errors.As(err, &ce) {
		return ce.code
	}
	if isCobraUsage(err) {
		fmt.Fprintf(stderr, "idem: %v\n", err)
		return runner.ExitUsage
	}
	fmt.Fprintf(stderr, "idem: %v\n", err)
	return max(runner.ExitCode(err), runner.ExitFailure)
}

// codeError is an error already reported, carrying its exit code.
type codeError struct{ code int }

func (e *codeError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires exactly", "invalid argument", "flag needs an argument", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func (a *app) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "idem",
		Short: "Run versioned SQL pipelines on DuckDB so that re-running is always safe",
		Long: `idem runs versioned SQL pipelines on an embedded DuckDB database.

The same inputs give byte-identical output, a batch applies once however
often it is retried, and the target holds exactly the snapshot its state
row names, committed in the same transaction.

Exit codes: 0 success (also skipped and already committed), 1 runtime
failure (nothing committed), 2 usage or job-file error, 3 refused by a
guard, 4 database held by another writer.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return a.checkFlags(cmd) },
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.AddCommand(
		a.newRunCmd(),
		a.newPlanCmd(),
		a.newQueryCmd(),
		a.newLogCmd(),
		a.newFenceCmd(),
		a.newVersionCmd(),
		a.newLintCmd(),
		a.newTestCmd(),
		a.newInitCmd(),
		a.newCompactCmd(),
		a.newBackupCmd(),
		a.newDocsCmd(),
	)
	a.addSnapshotCmds(root)
	return root
}

// common flags shared by the commands that open a job's database.
type dbFlags struct {
	db          string
	wait        time.Duration
	memoryLimit string
	threads     int
	tempDir     string
	jsonOut     bool
}

func (f *dbFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.db, "db", "", "database file (overrides the job file's database)")
	cmd.Flags().DurationVar(&f.wait, "wait", 0, "wait this long for another writer to release the database (default: fail at once, exit 4)")
	cmd.Flags().StringVar(&f.memoryLimit, "memory-limit", "", "DuckDB memory_limit, e.g. 2GB (overrides [duckdb] memory_limit)")
	cmd.Flags().IntVar(&f.threads, "threads", 0, "DuckDB threads (overrides [duckdb] threads)")
	cmd.Flags().StringVar(&f.tempDir, "temp-directory", "", "DuckDB temp_directory for spilling (overrides [duckdb] temp_directory)")
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print one JSON object on stdout")
}

// writerFlags are the guards every writing command takes: the snapshot the
// writer prepared against and its writer epoch.
type writerFlags struct {
	parent, epoch int64
}

func (w *writerFlags) register(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&w.epoch, "epoch", 0, "refuse unless this is the job's current writer epoch (see idem fence)")
	cmd.Flags().Int64Var(&w.parent, "expect-parent", 0, "refuse unless the job's latest snapshot is this one")
}

// guards returns the flags that were given, nil for the others.
func (w *writerFlags) guards(cmd *cobra.Command) (parent, epoch *int64) {
	if cmd.Flags().Changed("expect-parent") {
		parent = &w.parent
	}
	if cmd.Flags().Changed("epoch") {
		epoch = &w.epoch
	}
	return parent, epoch
}

// printJSON writes v as one JSON object and a newline.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// fail reports err in the requested form and returns its exit code as an
// error for Main.
func (a *app) fail(jsonOut bool, err error) error {
	code := max(runner.ExitCode(err), runner.ExitFailure)
	// The public API names the job an error is of; the command's messages
	// name it themselves, as ever.
	var je *runner.JobError
	if errors.As(err, &je) {
		code, err = je.Code, je.Err
	}
	if jsonOut {
		_ = a.printJSON(map[string]any{"error": err.Error(), "exit_code": code})
	}
	fmt.Fprintf(a.stderr, "idem: %v\n", err)
	return &codeError{code: code}
}
