package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// applyJob is the apply and history cases' job; %d is its transform
// version (-apply-transform).
const applyJob = `name = "bench_changes"
pipeline = "versioned_changes"
transform_version = %d
schema_version = 1
database = "unused.duckdb"

[input]
path = "unused.parquet"
format = "parquet"

[target]
table = "changes"
`

// limitArgs are the idem flags and floor flags for one memory limit.
func (b *bench) limitArgs(limit, tmp string) []string {
	if limit == "none" || limit == "" {
		return nil
	}
	return []string{"--memory-limit", limit, "--temp-directory", tmp}
}

// prepareApply generates the base and the batch and loads the base into a
// prepared database with idem itself (so the floor starts from exactly the
// database idem would have).
func (b *bench) prepareApply(ctx context.Context) (dir, job, prepared, batch string, err error) {
	dir = filepath.Join(b.dir, fmt.Sprintf("apply-%d", b.n))
	if err = os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	base := filepath.Join(dir, "base.parquet")
	batch = filepath.Join(dir, "batch.parquet")
	job = filepath.Join(dir, "job.toml")
	// The base is loaded by the job of the measured transform version, so
	// each version has its prepared database.
	prepared = filepath.Join(dir, fmt.Sprintf("prepared-v%d.duckdb", b.applyTransform))
	logf("apply N=%d: generating inputs in %s", b.n, dir)
	if err = b.generate(ctx, "base", b.n, base); err != nil {
		return
	}
	if err = b.generate(ctx, "batch", b.n, batch); err != nil {
		return
	}
	if err = writeFile(job, fmt.Sprintf(applyJob, b.applyTransform)); err != nil {
		return
	}
	if _, err = os.Stat(prepared); err == nil {
		return
	}
	logf("apply N=%d: loading %d stored entities with idem", b.n, b.n)
	tmp := prepared + ".tmp"
	removeDB(tmp)
	var m measure
	m, err = runChild(ctx, "", b.idem, "run", job, "--db", tmp, "--input", base, "--batch-id", "base", "--quiet")
	if err != nil {
		return
	}
	logf("apply N=%d: base load took %.1fs, peak RSS %s", b.n, m.wall.Seconds(), human(m.rss))
	os.RemoveAll(tmp + ".inputs")
	err = os.Rename(tmp, prepared)
	return
}

func (b *bench) apply(ctx context.Context) error {
	dir, job, prepared, batch, err := b.prepareApply(ctx)
	if err != nil {
		return err
	}
	return b.perLimit(ctx, "apply", "apply versioned_changes", dir, prepared,
		[]string{"run", job, "--input", batch, "--batch-id", "batch-2", "--quiet"},
		[]string{"child", "apply", "--input", batch, "--batch-id", "batch-2"},
		compareApply)
}

// perLimit measures idem against the floor under each of b.limits: each
// repetition copies the prepared database, runs idemArgs (the built idem)
// and floorArgs (this program) with --db added, then compare checks that
// both wrote the same rows.
func (b *bench) perLimit(ctx context.Context, kind, name, dir, prepared string, idemArgs, floorArgs []string, compare func(ctx context.Context, idemDB, floorDB string) error) error {
	tmp := filepath.Join(dir, "spill")
	for _, limit := range b.limits {
		logf("%s N=%d memory limit %s", kind, b.n, limit)
		r := &row{name: name, n: b.n, limit: limit, floorName: "hand-written SQL, one transaction"}
		idemDB := filepath.Join(dir, "run-idem.duckdb")
		floorDB := filepath.Join(dir, "run-floor.duckdb")
		extra := b.limitArgs(limit, tmp)
		spill := ""
		if extra != nil {
			spill = tmp
			os.MkdirAll(tmp, 0o755)
		}
		fresh := func(bin, db string, args []string) (measure, error) {
			removeDB(db)
			if err := copyFile(prepared, db); err != nil {
				return measure{}, err
			}
			full := append(append(append([]string{}, args...), "--db", db), extra...)
			return runChild(ctx, spill, bin, full...)
		}
		runIdem := func(int) (measure, error) { return fresh(b.idem, idemDB, idemArgs) }
		runFloor := func(int) (measure, error) { return fresh(b.self, floorDB, floorArgs) }
		if err := b.pair(ctx, r, runIdem, runFloor); err != nil {
			return err
		}
		if err := compare(ctx, idemDB, floorDB); err != nil {
			return err
		}
		removeDB(idemDB)
		removeDB(floorDB)
	}
	return nil
}

// compareApply checks that idem and the floor wrote the same target rows,
// outcome rows and history, and one ledger row each.
func compareApply(ctx context.Context, idemDB, floorDB string) error {
	return compare(ctx, idemDB, floorDB, []struct{ what, q string }{
		{"target", "SELECT * FROM changes"},
		{"outcomes", "SELECT * FROM changes_outcomes"},
		// idem appends history rows and closes the superseded ones later,
		// in bulk (catalog.CloseHistory); the floor closes them at once.
		// Compared closed: each open row ends where the next row of its key
		// begins, and markers (idem_to = idem_from) go.
		{"history", `SELECT * EXCLUDE (idem_to, idem_next), coalesce(idem_to, idem_next) AS idem_to FROM (
			SELECT *, lead(idem_from) OVER (PARTITION BY entity_id ORDER BY idem_from) AS idem_next
			FROM idem.bench_changes__history) WHERE idem_to IS DISTINCT FROM idem_from`},
		{"ledger", "SELECT job, batch_id, rows_in, outcomes, snapshot FROM idem.ledger"},
		{"state", "SELECT job, snapshot FROM idem.jobs"},
	})
}

// compare fingerprints each query in both databases and fails on the first
// difference.
func compare(ctx context.Context, idemDB, floorDB string, queries []struct{ what, q string }) error {
	return compareBy(ctx, "fingerprint", idemDB, floorDB, queries)
}

// compareBy is compare with each query's text given to child kind
// (fingerprint: a digest of its rows; query: its one value as it is).
func compareBy(ctx context.Context, kind, idemDB, floorDB string, queries []struct{ what, q string }) error {
	for _, q := range queries {
		var got [2]string
		for i, path := range []string{idemDB, floorDB} {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			out, err := exec.CommandContext(ctx, self, "child", kind, "--db", path, "--sql", q.q).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s %s of %s: %v: %s", kind, q.what, path, err, out)
			}
			got[i] = strings.TrimSpace(string(out))
		}
		if got[0] != got[1] {
			return fmt.Errorf("idem and the floor disagree on %s: idem %s, floor %s", q.what, got[0], got[1])
		}
		logf("  idem and floor agree on %s: %s", q.what, got[0])
	}
	return nil
}

const sampleJob = `name = "bench_sample"
pipeline = "sample"
transform_version = 2
schema_version = 2
database = "unused.duckdb"

[input]
path = "unused.csv"
format = "csv"

[target]
table = "occurrence_sample"

[params]
cap = 1000
licenses = ["CC0 1.0", "CC BY 4.0"]
`

// noop re-runs a refresh job whose key is unchanged over a noopBytes input:
// idem hashes the input, reads its state and skips. The reference is
// hashing the same file with Go's crypto/sha256 in a child process.
func (b *bench) noop(ctx context.Context) error {
	dir := filepath.Join(b.dir, "noop")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rows := b.noopBytes / 903 // 903 bytes a row on average
	input := filepath.Join(dir, fmt.Sprintf("occurrences-%d.csv", b.noopBytes))
	logf("noop: generating a %s input", human(b.noopBytes))
	if err := b.generate(ctx, "noop", rows, input); err != nil {
		return err
	}
	st, err := os.Stat(input)
	if err != nil {
		return err
	}
	job := filepath.Join(dir, "job.toml")
	if err := writeFile(job, sampleJob); err != nil {
		return err
	}
	db := filepath.Join(dir, fmt.Sprintf("noop-%d.duckdb", b.noopBytes))
	if _, err := os.Stat(db); err != nil {
		logf("noop: first load of %s (%d rows)", human(st.Size()), rows)
		m, err := runChild(ctx, "", b.idem, "run", job, "--db", db, "--input", input, "--quiet")
		if err != nil {
			return err
		}
		logf("noop: first load took %.1fs, peak RSS %s", m.wall.Seconds(), human(m.rss))
	}
	r := &row{name: fmt.Sprintf("no-op re-run, %s input", human(st.Size())), limit: "none", floorName: "Go crypto/sha256 of the file"}
	runIdem := func(int) (measure, error) {
		return runChild(ctx, "", b.idem, "run", job, "--db", db, "--input", input, "--quiet")
	}
	runFloor := func(int) (measure, error) {
		return runChild(ctx, "", b.self, "child", "sha256", "--input", input)
	}
	return b.pair(ctx, r, runIdem, runFloor)
}

// upToDate times `idem run` of the small sample job when nothing changed.
func (b *bench) upToDate(ctx context.Context) error {
	dir := filepath.Join(b.dir, "uptodate")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	input, err := filepath.Abs("fixtures/sample/occurrences-a.csv")
	if err != nil {
		return err
	}
	job := filepath.Join(dir, "job.toml")
	if err := writeFile(job, sampleJob); err != nil {
		return err
	}
	db := filepath.Join(dir, "small.duckdb")
	removeDB(db)
	if _, err := runChild(ctx, "", b.idem, "run", job, "--db", db, "--input", input, "--quiet"); err != nil {
		return err
	}
	r := row{name: "up-to-date small job (3000 rows)", limit: "none", note: "target: under 150 ms wall"}
	return b.repeat(ctx, r, max(b.reps, 10), "up-to-date", "run", job, "--db", db, "--input", input, "--quiet")
}

// repeat runs idem with args n times as row r's idem column, logs the
// median wall time under label and adds the row (a case without a floor).
func (b *bench) repeat(ctx context.Context, r row, n int, label string, args ...string) error {
	for range n {
		m, err := runChild(ctx, "", b.idem, args...)
		if err != nil {
			return err
		}
		r.idem = append(r.idem, m)
	}
	ws := walls(r.idem)
	slices.Sort(ws)
	logf("%s: median %.0f ms", label, ws[len(ws)/2]*1000)
	b.rows = append(b.rows, r)
	return nil
}

// export compares `idem export` of the apply case's target with a raw
// COPY ... ORDER BY key TO csv, when the command exists.
func (b *bench) export(ctx context.Context) error {
	help, err := exec.CommandContext(ctx, b.idem, "export", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "--out") {
		logf("export: not available")
		b.rows = append(b.rows, row{name: "export", unavailable: true})
		return nil
	}
	var quiet []string
	if strings.Contains(string(help), "--quiet") {
		quiet = []string{"--quiet"}
	}
	dir, job, prepared, _, err := b.prepareApply(ctx)
	if err != nil {
		return err
	}
	r := &row{name: "export csv", n: b.n, limit: "none", floorName: "COPY (SELECT * ORDER BY key) TO csv"}
	idemOut := filepath.Join(dir, "idem-export.csv")
	floorOut := filepath.Join(dir, "floor-export.csv")
	runIdem := func(int) (measure, error) {
		os.Remove(idemOut)
		return runChild(ctx, "", b.idem, append([]string{"export", job, "--db", prepared, "--table", "changes", "--out", idemOut, "--format", "csv"}, quiet...)...)
	}
	runFloor := func(int) (measure, error) {
		os.Remove(floorOut)
		return runChild(ctx, "", b.self, "child", "export", "--db", prepared, "--out", floorOut)
	}
	start := time.Now()
	if err := b.pair(ctx, r, runIdem, runFloor); err != nil {
		return err
	}
	logf("export: %.1fs", time.Since(start).Seconds())
	return nil
}

// refreshCase reloads the sample pipeline's target from input B over a
// database holding the snapshot of input A (both n rows): the whole target
// is replaced and the history compared.
func (b *bench) refreshCase(ctx context.Context) error {
	dir := filepath.Join(b.dir, fmt.Sprintf("refresh-%d", b.n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	inA := filepath.Join(dir, "occurrences-a.csv")
	inB := filepath.Join(dir, "occurrences-b.csv")
	job := filepath.Join(dir, "job.toml")
	prepared := filepath.Join(dir, "prepared.duckdb")
	logf("refresh N=%d: generating inputs in %s", b.n, dir)
	if err := b.generate(ctx, "sample", b.n, inA); err != nil {
		return err
	}
	if err := b.generate(ctx, "sample-b", b.n, inB); err != nil {
		return err
	}
	if err := writeFile(job, sampleJob); err != nil {
		return err
	}
	if _, err := os.Stat(prepared); err != nil {
		tmp := prepared + ".tmp"
		removeDB(tmp)
		m, err := runChild(ctx, "", b.idem, "run", job, "--db", tmp, "--input", inA, "--quiet")
		if err != nil {
			return err
		}
		logf("refresh N=%d: first load took %.1fs, peak RSS %s", b.n, m.wall.Seconds(), human(m.rss))
		os.RemoveAll(tmp + ".inputs")
		if err := os.Rename(tmp, prepared); err != nil {
			return err
		}
	}
	return b.perLimit(ctx, "refresh", "refresh sample", dir, prepared,
		[]string{"run", job, "--input", inB, "--quiet"},
		[]string{"child", "refresh", "--input", inB},
		func(ctx context.Context, idemDB, floorDB string) error {
			return compare(ctx, idemDB, floorDB, []struct{ what, q string }{
				{"target", "SELECT * FROM occurrence_sample"},
				{"outcomes", "SELECT * FROM occurrence_sample_outcomes"},
				{"history", "SELECT * FROM idem.bench_sample__history"},
				{"snapshots", "SELECT job, snapshot, parent, rows_in, rows_out, outcomes FROM idem.snapshots"},
			})
		})
}
