package runner

import (
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/project"
	"github.com/idem-dev/idem/internal/report"
)

// Option configures Open, as the With functions make them. Each checks
// its value; Open returns a bad one as an ErrUsage error and opens
// nothing.
type Option interface {
	apply(*settings) error
}

// SelectorHelp describes the forms of WithSelect and WithExclude, as idem
// run --help prints them.
const SelectorHelp = project.SelectorHelp

// optionFunc is an Option that is a function.
type optionFunc func(*settings) error

func (f optionFunc) apply(s *settings) error { return f(s) }

// settings are what the options set.
type settings struct {
	database    string
	duckdb      job.DuckDBSettings // overrides of the jobs' [duckdb]
	wait        time.Duration
	selects     []string
	concurrency int
	progress    report.Progress
	hooks       []AfterCommit
	fault       func(database string) func(point string)
	replica     func(ReplicaNote)
	noSHA256    bool
	fullRefresh bool
	skipHistory bool // cmd/idem-bench's floor (bench_idembench.go)
	excludes    []string
	skipped     func(file string)
	each        func(*Result, error)
	eachPlan    func(*Plan, error)
	stream      StreamOptions
}

// WithEachPlan makes Project.Plan call f with each job's Plan as WithEachJob
// does for Run: a plan the run would be refused with its *JobError, a job
// no plan could be made of with a nil Plan and its *JobError.
func WithEachPlan(f func(pl *Plan, err error)) Option {
	return optionFunc(func(s *settings) error {
		s.eachPlan = f
		return nil
	})
}

// WithExclude leaves out the jobs the patterns pick (the forms of
// WithSelect), after every WithSelect, as the idem command's --exclude.
func WithExclude(patterns ...string) Option {
	return optionFunc(func(s *settings) error {
		s.excludes = append(s.excludes, patterns...)
		return nil
	})
}

// WithSkippedFiles calls f, in Open, with each *.toml file of a folder
// that is not a job file (no top-level pipeline =) and is not read (the
// idem command's --verbose names them).
func WithSkippedFiles(f func(file string)) Option {
	return optionFunc(func(s *settings) error {
		s.skipped = f
		return nil
	})
}

// WithEachJob makes Project.Run call f with each job's Result as soon as
// the job and every job before it in run order are done, in run order,
// from one goroutine at a time: a job that failed or was refused with its
// *JobError, a blocked one (Decision blocked) and the others with nil. The
// idem command prints each job so, in the same order whatever
// WithConcurrency.
func WithEachJob(f func(r *Result, err error)) Option {
	return optionFunc(func(s *settings) error {
		s.each = f
		return nil
	})
}

// WithoutSHA256 leaves the SHA256 of a run's Result empty: the run does
// not read its committed snapshot back (a full read of the target) to
// compute it. Project.Show and Project.Export still give it.
func WithoutSHA256() Option {
	return optionFunc(func(s *settings) error {
		s.noSHA256 = true
		return nil
	})
}

// WithFullRefresh makes Project.Run rebuild each refresh job, model and
// seed ([input] mode = "replace") from its inputs as a new snapshot even
// when its key is unchanged, and an incremental model whole, as idem run
// --full-refresh over a project does; its other apply jobs run as they
// would. Batch.FullRefresh asks it of one run.
func WithFullRefresh() Option {
	return optionFunc(func(s *settings) error {
		s.fullRefresh = true
		return nil
	})
}

// WithDatabase makes every job read and write the database file at path
// instead of the one its job file names (the idem command's --db).
func WithDatabase(path string) Option {
	return optionFunc(func(s *settings) error {
		if path == "" {
			return report.Usage("WithDatabase: empty path")
		}
		s.database = path
		return nil
	})
}

// CheckMemoryLimit refuses (ErrUsage) a DuckDB memory_limit that DuckDB
// would not parse, as WithMemoryLimit does: a size ("2GB", "512MiB") or
// "none".
func CheckMemoryLimit(size string) error {
	if err := job.CheckMemoryLimit(size); err != nil {
		return jobError("", report.Usage("%v", err))
	}
	return nil
}

// WithMemoryLimit sets DuckDB's memory_limit (e.g. "2GB", "512MiB",
// "none"), overriding the jobs' [duckdb] memory_limit. A size DuckDB would
// not parse is an error.
func WithMemoryLimit(size string) Option {
	return optionFunc(func(s *settings) error {
		if err := job.CheckMemoryLimit(size); err != nil {
			return report.Usage("WithMemoryLimit: %v", err)
		}
		s.duckdb.MemoryLimit = size
		return nil
	})
}

// WithThreads sets DuckDB's threads, 1 to 1024, overriding the jobs'
// [duckdb] threads. Exports and reruns give the same bytes whatever it is.
func WithThreads(n int) Option {
	return optionFunc(func(s *settings) error {
		if n < 1 {
			return report.Usage("threads %d: want 1 or more", n)
		}
		if n > report.MaxThreads {
			return report.Usage("threads %d: at most %d", n, report.MaxThreads)
		}
		s.duckdb.Threads = n
		return nil
	})
}

// WithTempDirectory sets the folder DuckDB spills to, overriding the jobs'
// [duckdb] temp_directory (default: beside the database file).
func WithTempDirectory(dir string) Option {
	return optionFunc(func(s *settings) error {
		if dir == "" {
			return report.Usage("WithTempDirectory: empty path")
		}
		s.duckdb.TempDirectory = dir
		return nil
	})
}

// WithWait makes a call that finds its database held by another writer
// retry for up to d before it fails with ErrLocked (default: fail at once).
func WithWait(d time.Duration) Option {
	return optionFunc(func(s *settings) error {
		if d < 0 {
			return report.Usage("WithWait(%s): must not be negative", d)
		}
		s.wait = d
		return nil
	})
}

// WithSelect keeps the jobs the patterns pick, as the idem command's
// --select: NAME, NAME+ (and every job downstream of it), +NAME (and every
// job upstream), and the other forms SelectorHelp lists. A name that is no
// job of the project fails Open.
func WithSelect(patterns ...string) Option {
	return optionFunc(func(s *settings) error {
		for _, p := range patterns {
			if p == "" {
				return report.Usage("WithSelect: empty pattern")
			}
		}
		s.selects = append(s.selects, patterns...)
		return nil
	})
}

// WithConcurrency lets Project.Run run up to n jobs at once, each as soon
// as the jobs it reads are done (the idem command's --jobs, whose default
// is the cores; here the default is 1). Jobs of one database file decide at
// once but write one transaction at a time.
func WithConcurrency(n int) Option {
	return optionFunc(func(s *settings) error {
		if n < 1 {
			return report.Usage("WithConcurrency(%d): want 1 or more", n)
		}
		s.concurrency = n
		return nil
	})
}

// Progress receives progress events of long work: a run's steps, a
// rerun's replay, the sha256 of a whole target. Its zero value is silent.
// The idem command draws it on a terminal.
type Progress struct {
	// Step is called when a named step starts; the func it returns is
	// called when the step ends.
	Step func(name string) (done func(elapsed time.Duration))
	// Percent reports how far DuckDB is through the statement the running
	// step executes (0-100), between a Step and its done.
	Percent func(pct float64)
	// Bytes reports bytes done of total while a file is hashed, copied or
	// exported.
	Bytes func(label string, done, total int64)
	// Timings asks for every phase of a run as a step, not only the long
	// ones.
	Timings bool
}

// WithProgress sends the progress of long work to p.
func WithProgress(p Progress) Option {
	return optionFunc(func(s *settings) error {
		s.progress = report.Progress{Step: p.Step, Percent: p.Percent, Bytes: p.Bytes, Timings: p.Timings}
		return nil
	})
}
