package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

type bench struct {
	n         int64
	reps      int
	limits    []string
	dir       string
	noopBytes int64
	idem      string
	self      string
	// projectOrders is the project case's orders over its twelve months.
	projectOrders int64
	// projectThreads, when above 0, is the project case's DuckDB threads.
	projectThreads int
	// projectBatch, when set, is the project's files sources' [input]
	// batch.
	projectBatch string
	// applyTransform is the versioned_changes transform version of the
	// apply and history cases.
	applyTransform int
	// streamTransform is the versioned_changes transform version of the
	// stream case (both sides).
	streamTransform int
	rows            []row
}

// measure is one child process: its wall time and peak RSS.
type measure struct {
	wall  time.Duration
	cpu   time.Duration // user + system
	rss   int64         // bytes
	spill int64         // peak bytes in the temp directory while it ran
}

// row is one line of the result table.
type row struct {
	name, limit string
	n           int64
	idem, floor []measure
	floorName   string
	note        string
	unavailable bool
}

func (b *bench) run(ctx context.Context, cases []string) error {
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b.self = self
	if b.idem == "" {
		b.idem = filepath.Join(b.dir, "idem")
		logf("building %s", b.idem)
		// -tags idembench: the history case's floor sets
		// IDEM_BENCH_NO_HISTORY=1, which only such a build reads.
		out, err := exec.CommandContext(ctx, "go", "build", "-tags", "idembench", "-o", b.idem, "./cmd/idem").CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build -tags idembench ./cmd/idem (run from the repository root): %v\n%s", err, out)
		}
	}
	for _, c := range cases {
		var err error
		switch c {
		case "apply":
			err = b.apply(ctx)
		case "refresh":
			err = b.refreshCase(ctx)
		case "noop":
			err = b.noop(ctx)
		case "uptodate":
			err = b.upToDate(ctx)
		case "export":
			err = b.export(ctx)
		case "history":
			err = b.history(ctx)
		case "incremental":
			err = b.incremental(ctx)
		case "noop-project":
			err = b.noopProject(ctx)
		case "env":
			err = b.envCase(ctx) // env.go
		case "jsonl":
			err = b.jsonlCase(ctx) // jsonl.go
		case "project":
			err = b.projectCase(ctx) // projectcase.go
		case "stream":
			err = b.streamCase(ctx) // stream.go
		default:
			err = fmt.Errorf("unknown case %q", c)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
	}
	b.print(os.Stdout)
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// runChild runs one process to completion and returns its wall time and
// peak RSS. spillDir, when set, is polled for the bytes DuckDB spills there.
func runChild(ctx context.Context, spillDir string, name string, args ...string) (measure, error) {
	return runChildEnv(ctx, nil, spillDir, name, args...)
}

// runChildEnv is runChild with env added to this process's environment.
func runChildEnv(ctx context.Context, env []string, spillDir string, name string, args ...string) (measure, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stopPoll := make(chan struct{})
	spilled := make(chan int64, 1)
	go func() {
		var peak int64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if spillDir != "" {
				peak = max(peak, dirBytes(spillDir))
			}
			select {
			case <-stopPoll:
				spilled <- peak
				return
			case <-t.C:
			}
		}
	}()
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	close(stopPoll)
	m := measure{wall: wall, spill: <-spilled}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			m.rss = ru.Maxrss * 1024 // KiB on Linux
			m.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if err != nil {
		return m, fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String())
	}
	return m, nil
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// copyFile copies a prepared database so that every repetition starts from
// the same state.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// removeDB removes a database file, its WAL and its retained inputs.
func removeDB(path string) {
	os.Remove(path)
	os.Remove(path + ".wal")
	os.RemoveAll(path + ".inputs")
}

// pair alternates idem and floor runs: even repetitions run idem first, odd
// ones the floor first, so neither always meets a warmer cache.
func (b *bench) pair(ctx context.Context, r *row, runIdem, runFloor func(rep int) (measure, error)) error {
	for rep := 0; rep < b.reps; rep++ {
		order := []bool{true, false}
		if rep%2 == 1 {
			order = []bool{false, true}
		}
		for _, isIdem := range order {
			runtime.GC()
			if isIdem {
				m, err := runIdem(rep)
				if err != nil {
					return err
				}
				r.idem = append(r.idem, m)
				logf("  rep %d idem  %8.3fs  cpu %8.3fs  rss %s  spill %s", rep+1, m.wall.Seconds(), m.cpu.Seconds(), human(m.rss), human(m.spill))
			} else {
				m, err := runFloor(rep)
				if err != nil {
					return err
				}
				r.floor = append(r.floor, m)
				logf("  rep %d floor %8.3fs  cpu %8.3fs  rss %s  spill %s", rep+1, m.wall.Seconds(), m.cpu.Seconds(), human(m.rss), human(m.spill))
			}
		}
	}
	b.rows = append(b.rows, *r)
	return nil
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n > 0:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return "0"
}

func medianMinMax(xs []float64) (float64, float64, float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return m, s[0], s[len(s)-1]
}

func walls(ms []measure) []float64 {
	out := make([]float64, len(ms))
	for i, m := range ms {
		out[i] = m.wall.Seconds()
	}
	return out
}

func peakRSS(ms []measure) int64 {
	var p int64
	for _, m := range ms {
		p = max(p, m.rss)
	}
	return p
}

func peakSpill(ms []measure) int64 {
	var p int64
	for _, m := range ms {
		p = max(p, m.spill)
	}
	return p
}

func (b *bench) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tN\tmemory limit\tidem s (median, min-max)\tfloor s (median, min-max)\tratio (median, min-max)\tCPU ratio (median)\tidem rows/s\tidem peak RSS\tfloor peak RSS\tidem spill\tfloor")
	for _, r := range b.rows {
		if r.unavailable {
			fmt.Fprintf(tw, "%s: not available\t\t\t\t\t\t\t\t\t\t\t\n", r.name)
			continue
		}
		im, ilo, ihi := medianMinMax(walls(r.idem))
		cols := []string{r.name, fmt.Sprint(r.n), r.limit, fmt.Sprintf("%.3f (%.3f-%.3f)", im, ilo, ihi)}
		if len(r.floor) > 0 {
			fm, flo, fhi := medianMinMax(walls(r.floor))
			ratios := make([]float64, len(r.idem))
			for i := range r.idem {
				ratios[i] = r.idem[i].wall.Seconds() / r.floor[i].wall.Seconds()
			}
			rm, rlo, rhi := medianMinMax(ratios)
			cpuRatios := make([]float64, len(r.idem))
			for i := range r.idem {
				cpuRatios[i] = r.idem[i].cpu.Seconds() / r.floor[i].cpu.Seconds()
			}
			cm, _, _ := medianMinMax(cpuRatios)
			cols = append(cols, fmt.Sprintf("%.3f (%.3f-%.3f)", fm, flo, fhi), fmt.Sprintf("%.2fx (%.2f-%.2f)", rm, rlo, rhi), fmt.Sprintf("%.2fx", cm))
		} else {
			cols = append(cols, "-", "-", "-")
		}
		rps := "-"
		if r.n > 0 {
			rps = fmt.Sprintf("%.0f", float64(r.n)/im)
		}
		floorRSS := "-"
		if len(r.floor) > 0 {
			floorRSS = human(peakRSS(r.floor))
		}
		cols = append(cols, rps, human(peakRSS(r.idem)), floorRSS, human(peakSpill(r.idem)), r.floorName)
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	tw.Flush()
	for _, r := range b.rows {
		if r.note != "" {
			fmt.Fprintf(w, "%s: %s\n", r.name, r.note)
		}
	}
}

// fingerprint is an order-independent digest of a query's rows, to check
// that idem and the floor wrote the same thing.
func fingerprint(ctx context.Context, db *sql.DB, query string) (string, error) {
	var n int64
	var h sql.NullString
	err := db.QueryRowContext(ctx, "SELECT count(*), CAST(sum(hash(q)::HUGEINT) AS VARCHAR) FROM ("+query+") q").Scan(&n, &h)
	return fmt.Sprintf("%d rows, sum of hashes %s", n, h.String), err
}

func openRO(path string) (*sql.DB, error) {
	return sql.Open("duckdb", path+"?access_mode=read_only")
}

// writeFile writes a small text file (job files).
func writeFile(path, text string) error {
	return os.WriteFile(path, []byte(text), 0o644)
}
