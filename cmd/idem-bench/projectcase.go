package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// projectCase measures the project (project.go) against its floor
// (projectfloor.go), side by side, from the same generated CSVs:
//
//   - full build: months 1-12 in the landing folders, a fresh database,
//     one `idem run DIR` (each source applies its twelve files, one batch
//     each, then every model builds once) against the floor's full phase;
//   - nightly: month 13 dropped in, a copy of the full build's database,
//     one `idem run DIR` against the floor's nightly phase;
//   - no-op: `idem run DIR` again, nothing new, against the floor's noop
//     phase (open the database, list the landing files, find none new);
//   - plan: `idem plan DIR` in that state, against the same noop phase.
//
// After the full build and the nightly run every raw table (declared
// columns) and every model of idem's database must hold the same rows and
// column types as the floor's (sha256 of the sorted rows), or the case
// fails.
func (b *bench) projectCase(ctx context.Context) error {
	g := projGen{ordersPerMonth: b.projectOrders / 12}
	root := filepath.Join(b.dir, fmt.Sprintf("project-%d", g.ordersPerMonth*12))
	proj := filepath.Join(root, "proj")
	month13 := filepath.Join(root, "month13")
	logf("project: %d orders a month, generating %s", g.ordersPerMonth, root)
	if err := writeProject(proj, b.projectBatch); err != nil {
		return err
	}
	if err := writeReference(proj); err != nil {
		return err
	}
	for m := 1; m <= 12; m++ {
		if err := g.writeMonth(proj, m); err != nil {
			return err
		}
	}
	if err := g.writeMonth(month13, 13); err != nil {
		return err
	}
	landing13 := make([]string, 0, 3)
	for _, folder := range []string{"customers", "orders", "items"} {
		landing13 = append(landing13, filepath.Join("raw", folder, projMonthName(13)+".csv"))
	}
	drop13 := func(in bool) error {
		for _, f := range landing13 {
			if !in {
				if err := os.Remove(filepath.Join(proj, f)); err != nil && !os.IsNotExist(err) {
					return err
				}
				continue
			}
			if err := copyFile(filepath.Join(month13, f), filepath.Join(proj, f)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := drop13(false); err != nil {
		return err
	}
	idemData := filepath.Join(proj, "data")
	idemDB := filepath.Join(idemData, "project.duckdb")
	floorDB := filepath.Join(root, "floor.duckdb")
	saved12, floor12 := filepath.Join(root, "saved12"), filepath.Join(root, "floor12.duckdb")
	jobs := len(projSources) + len(projModelList)
	// --threads N is a flag of both idem and the floor child.
	var threads []string
	suffix := ""
	if b.projectThreads > 0 {
		threads = []string{"--threads", fmt.Sprint(b.projectThreads)}
		suffix = fmt.Sprintf(" (threads %d)", b.projectThreads)
	}
	if b.projectBatch != "" {
		suffix += fmt.Sprintf(" (batch %s)", b.projectBatch)
	}
	idem := func(args ...string) (measure, error) {
		return runChild(ctx, "", b.idem, append(append(args, proj, "--quiet"), threads...)...)
	}
	floor := func(phase string) (measure, error) {
		return runChild(ctx, "", b.self, append([]string{"child", "project", "--project", proj, "--phase", phase, "--db", floorDB}, threads...)...)
	}

	full := &row{name: fmt.Sprintf("project full build, %d jobs, 12 months%s", jobs, suffix), n: g.ordersPerMonth * 12, limit: "none", floorName: "the same SQL in one DuckDB process"}
	logf("project: full build")
	err := b.pairCPU(ctx, full, jobs,
		func(int) (measure, error) {
			os.RemoveAll(idemData)
			return idem("run")
		},
		func(int) (measure, error) {
			removeDB(floorDB)
			return floor("full")
		})
	if err != nil {
		return err
	}
	if err := compareProject(ctx, idemDB, floorDB); err != nil {
		return fmt.Errorf("full build: %w", err)
	}
	if err := copyTree(idemData, saved12); err != nil {
		return err
	}
	removeDB(floor12)
	if err := copyFile(floorDB, floor12); err != nil {
		return err
	}

	nightly := &row{name: "project nightly run, month 13" + suffix, n: g.ordersPerMonth, limit: "none", floorName: "the same SQL in one DuckDB process"}
	logf("project: nightly run")
	if err := drop13(true); err != nil {
		return err
	}
	err = b.pairCPU(ctx, nightly, jobs,
		func(int) (measure, error) {
			if err := copyTree(saved12, idemData); err != nil {
				return measure{}, err
			}
			return idem("run")
		},
		func(int) (measure, error) {
			removeDB(floorDB)
			if err := copyFile(floor12, floorDB); err != nil {
				return measure{}, err
			}
			return floor("nightly")
		})
	if err != nil {
		return err
	}
	if err := compareProject(ctx, idemDB, floorDB); err != nil {
		return fmt.Errorf("nightly: %w", err)
	}

	// Nothing changed: a run and a plan.
	for _, c := range []struct {
		label, name, note, command string
	}{
		{"no-op run", "project no-op run", "goal: at most 0.25 s", "run"},
		{"plan", "idem plan DIR, nothing changed", "goal: at most 0.5 s", "plan"},
	} {
		logf("project: %s", c.label)
		r := &row{name: c.name + suffix, limit: "none", floorName: "open the database, find no new landing file", note: c.note}
		err = b.pairCPU(ctx, r, jobs,
			func(int) (measure, error) { return idem(c.command) },
			func(int) (measure, error) { return floor("noop") })
		if err != nil {
			return err
		}
	}
	return drop13(false)
}

// pairCPU is pair, then the row's note gains cpuNote.
func (b *bench) pairCPU(ctx context.Context, r *row, jobs int, runIdem, runFloor func(rep int) (measure, error)) error {
	if err := b.pair(ctx, r, runIdem, runFloor); err != nil {
		return err
	}
	last := &b.rows[len(b.rows)-1]
	last.note = joinNote(last.note, cpuNote(last.idem, last.floor, jobs))
	return nil
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// cpuNote gives the medians of CPU seconds (user + system) of idem and the
// floor, their difference per job, and each repetition's CPU ratio.
func cpuNote(idem, floor []measure, jobs int) string {
	var ic, fc, ratios []float64
	var per []string
	for i := range idem {
		ic = append(ic, idem[i].cpu.Seconds())
		fc = append(fc, floor[i].cpu.Seconds())
		ratios = append(ratios, idem[i].cpu.Seconds()/floor[i].cpu.Seconds())
		per = append(per, fmt.Sprintf("%.2fx", ratios[i]))
	}
	im, _, _ := medianMinMax(ic)
	fm, _, _ := medianMinMax(fc)
	return fmt.Sprintf("CPU s median idem %.3f, floor %.3f, (idem-floor)/job %.0f ms; CPU ratio per rep %s", im, fm, (im-fm)*1000/float64(jobs), strings.Join(per, ", "))
}

// compareProject checks every raw table's declared columns and every
// model of idem's database against the floor's: the same column types and
// the same sha256 of the rows sorted as text.
func compareProject(ctx context.Context, idemDB, floorDB string) error {
	var checks []struct{ what, q string }
	for _, s := range projSources {
		cols := make([]string, len(s.columns))
		for i, c := range s.columns {
			cols[i] = c[0]
		}
		checks = append(checks, struct{ what, q string }{s.name, tableDigestSQL(s.name, strings.Join(cols, ", "))})
	}
	for _, m := range projModelList {
		checks = append(checks, struct{ what, q string }{m.name, tableDigestSQL(m.name, "*")})
	}
	return compareBy(ctx, "query", idemDB, floorDB, checks)
}

// tableDigestSQL is one line naming table's columns and types (but
// idem_status) and the sha256 of its rows, each cast to text, sorted.
func tableDigestSQL(table, columns string) string {
	return fmt.Sprintf(`SELECT (SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY column_index)
        FROM duckdb_columns() WHERE schema_name = 'main' AND table_name = %[1]s AND column_name <> 'idem_status')
    || ': ' || count(*) || ' rows, sha256 ' || sha256(coalesce(string_agg(r, chr(10) ORDER BY r), ''))
FROM (SELECT CAST(q AS VARCHAR) AS r FROM (SELECT %[2]s FROM main.%[3]s) AS q)`, quote(table), columns, table)
}

// copyTree replaces dst with a copy of the folder src (a database, its
// WAL and its retained inputs).
func copyTree(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		return copyFile(path, filepath.Join(dst, rel))
	})
}
