package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The incremental case: a model over an n-row upstream, after 1% of the
// upstream's rows changed, either all in one partition (one day of 100)
// or spread over keys (every day), recomputed incrementally ([target]
// incremental = "partition") against the same model rebuilt whole; and a
// model by key (incremental = "key": one row of each upstream id) after
// the spread change. Each pair are idem runs from a copy of one prepared
// database; the two results are exported and must have the same sha256.

// incrBaseSQL is the upstream: n sales over 100 days and 20 zones.
const incrBaseSQL = `
COPY (
    SELECT r AS id, CAST(r % 100 AS INTEGER) AS day, CAST(hash(r) % 20 AS INTEGER) AS zone,
        CAST((hash(r * 7) % 100000) / 100 AS DECIMAL(12,2)) AS amount, CAST(1 AS BIGINT) AS ver
    FROM range({{N}}) t(r)
) TO {{OUT}} (FORMAT parquet)`

// incrOneSQL changes 1% of the rows, all of day 7 (n/100 rows).
const incrOneSQL = `
COPY (
    SELECT r AS id, CAST(r % 100 AS INTEGER) AS day, CAST(hash(r) % 20 AS INTEGER) AS zone,
        CAST((hash(r * 11) % 100000) / 100 AS DECIMAL(12,2)) AS amount, CAST(2 AS BIGINT) AS ver
    FROM range({{N}}) t(r) WHERE r % 100 = 7
) TO {{OUT}} (FORMAT parquet)`

// incrSpreadSQL changes 1% of the rows, picked by hash over every day.
const incrSpreadSQL = `
COPY (
    SELECT r AS id, CAST(r % 100 AS INTEGER) AS day, CAST(hash(r) % 20 AS INTEGER) AS zone,
        CAST((hash(r * 11) % 100000) / 100 AS DECIMAL(12,2)) AS amount, CAST(2 AS BIGINT) AS ver
    FROM range({{N}}) t(r) WHERE hash(r * 13) % 100 = 0
) TO {{OUT}} (FORMAT parquet)`

const incrSourceJob = `name = "sales"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "unused.duckdb"

[input]
path = "unused.parquet"
format = "parquet"

[input.columns]
id = "BIGINT"
day = "INTEGER"
zone = "INTEGER"
amount = "DECIMAL(12,2)"
ver = "BIGINT"

[target]
key = ["id"]
order_by = "ver"
`

const incrModelSQL = `SELECT day, zone, count(*) AS sales, sum(amount) AS total, max(ver) AS ver
FROM {{upstream:sales}}
GROUP BY day, zone
`

// incrKeyModelSQL is the model by key: one row of each sale, with a
// window per key.
const incrKeyModelSQL = `SELECT id, day, zone, amount, CAST(amount * 1.2 AS DECIMAL(14,2)) AS gross, ver,
    count(*) OVER (PARTITION BY id) AS n
FROM {{upstream:sales}}
WHERE amount > 1
`

// incrModelJob is the model job NAME of file sql, keyed by key, with
// target settings extra ([target] incremental, or "" for a full rebuild).
func incrModelJob(name, sql, key, extra string) string {
	return fmt.Sprintf(`name = %q
pipeline = "select"
database = "unused.duckdb"

[input]
upstream = ["sales"]

[transform]
sql = %q

[target]
key = %s
%s`, name, sql, key, extra)
}

func (b *bench) incremental(ctx context.Context) error {
	dir := filepath.Join(b.dir, fmt.Sprintf("incremental-%d", b.n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, "base.parquet")
	logf("incremental N=%d: generating inputs in %s", b.n, dir)
	if err := b.generate(ctx, "incr-base", b.n, base); err != nil {
		return err
	}
	const byDay, byID = `["day", "zone"]`, `["id"]`
	files := map[string]string{
		"sales.toml": incrSourceJob, "daily.sql": incrModelSQL, "by_id.sql": incrKeyModelSQL,
		"daily.toml":      incrModelJob("daily", "daily.sql", byDay, "partition_by = \"day\"\nincremental = \"partition\"\n"),
		"daily_full.toml": incrModelJob("daily_full", "daily.sql", byDay, ""),
		"by_id.toml":      incrModelJob("by_id", "by_id.sql", byID, "incremental = \"key\"\n"),
		"by_id_full.toml": incrModelJob("by_id_full", "by_id.sql", byID, ""),
	}
	for name, text := range files {
		if err := writeFile(filepath.Join(dir, name), text); err != nil {
			return err
		}
	}
	job := func(name string) string { return filepath.Join(dir, name+".toml") }
	// The databases hold the upstream and both pairs of models (-2: since
	// by_id).
	loaded := filepath.Join(dir, "loaded-2.duckdb")
	if _, err := os.Stat(loaded); err != nil {
		tmp := loaded + ".tmp"
		removeDB(tmp)
		for _, args := range [][]string{
			{"run", job("sales"), "--input", base, "--batch-id", "base"},
			{"run", job("daily")}, {"run", job("daily_full")}, {"run", job("by_id")}, {"run", job("by_id_full")},
		} {
			m, err := runChild(ctx, "", b.idem, append(args, "--db", tmp, "--quiet")...)
			if err != nil {
				return err
			}
			logf("incremental N=%d: %s %s took %.1fs, peak RSS %s", b.n, args[0], filepath.Base(args[1]), m.wall.Seconds(), human(m.rss))
		}
		os.RemoveAll(tmp + ".inputs")
		if err := os.Rename(tmp, loaded); err != nil {
			return err
		}
	}
	for _, v := range []struct{ gen, name, model string }{
		{"incr-one", "1% of rows changed, all in one partition (1 day of 100)", "daily"},
		{"incr-spread", "1% of rows changed, spread over keys (every day)", "daily"},
		{"incr-spread", "by key (id), 1% of rows changed spread over keys", "by_id"},
	} {
		change := filepath.Join(dir, v.gen+".parquet")
		if err := b.generate(ctx, v.gen, b.n, change); err != nil {
			return err
		}
		prepared := filepath.Join(dir, v.gen+"-2.duckdb")
		if _, err := os.Stat(prepared); err != nil {
			tmp := prepared + ".tmp"
			removeDB(tmp)
			if err := copyFile(loaded, tmp); err != nil {
				return err
			}
			m, err := runChild(ctx, "", b.idem, "run", job("sales"), "--input", change, "--batch-id", v.gen, "--db", tmp, "--quiet")
			if err != nil {
				return err
			}
			logf("incremental N=%d: upstream change %s took %.1fs", b.n, v.gen, m.wall.Seconds())
			os.RemoveAll(tmp + ".inputs")
			if err := os.Rename(tmp, prepared); err != nil {
				return err
			}
		}
		r := &row{name: "model over upstream, " + v.name, n: b.n, limit: "none", floorName: "the same model rebuilt whole"}
		incrDB, fullDB := filepath.Join(dir, "run-incr.duckdb"), filepath.Join(dir, "run-full.duckdb")
		fresh := func(db, name string) (measure, error) {
			removeDB(db)
			if err := copyFile(prepared, db); err != nil {
				return measure{}, err
			}
			return runChild(ctx, "", b.idem, "run", job(name), "--db", db, "--quiet")
		}
		runIncr := func(int) (measure, error) { return fresh(incrDB, v.model) }
		runFull := func(int) (measure, error) { return fresh(fullDB, v.model+"_full") }
		if err := b.pair(ctx, r, runIncr, runFull); err != nil {
			return err
		}
		if err := b.sameExport(ctx, dir, job, v.model, incrDB, fullDB); err != nil {
			return err
		}
		// The incremental run must have gone by partition: replay it once
		// with --json.
		removeDB(incrDB)
		if err := copyFile(prepared, incrDB); err != nil {
			return err
		}
		out, err := exec.CommandContext(ctx, b.idem, "run", job(v.model), "--db", incrDB, "--json").Output()
		if err != nil {
			return fmt.Errorf("incremental run: %v", err)
		}
		var res struct {
			Incremental     string   `json:"incremental"`
			IncrementalNote string   `json:"incremental_note"`
			Partitions      []string `json:"partitions"`
			Keys            int64    `json:"keys"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			return fmt.Errorf("incremental run --json: %v: %s", err, out)
		}
		switch {
		case res.Incremental == "partition":
			r.note = fmt.Sprintf("%d partitions recomputed", len(res.Partitions))
		case res.Incremental == "key":
			r.note = fmt.Sprintf("%d keys recomputed", res.Keys)
		case strings.HasPrefix(res.IncrementalNote, "every partition changed"):
			r.note = "rebuilt whole: " + res.IncrementalNote
		default:
			return fmt.Errorf("the incremental model was rebuilt whole: %s", out)
		}
		b.rows[len(b.rows)-1].note = r.note
		logf("  incremental run: %s", r.note)
		removeDB(incrDB)
		removeDB(fullDB)
	}
	return nil
}

// sameExport exports the incremental model from incrDB and its full twin
// (model_full) from fullDB and fails unless both files have the same
// sha256.
func (b *bench) sameExport(ctx context.Context, dir string, job func(string) string, model, incrDB, fullDB string) error {
	var sums []string
	for _, x := range [][2]string{{model, incrDB}, {model + "_full", fullDB}} {
		out := filepath.Join(dir, x[0]+"-export.csv")
		os.Remove(out)
		text, err := exec.CommandContext(ctx, b.idem, "export", job(x[0]), "--db", x[1], "--out", out, "--json").Output()
		if err != nil {
			return fmt.Errorf("export %s: %v", x[0], err)
		}
		var res struct {
			SHA256 string `json:"sha256"`
			Rows   int64  `json:"rows"`
		}
		if err := json.Unmarshal(text, &res); err != nil {
			return fmt.Errorf("export %s: %v: %s", x[0], err, text)
		}
		sums = append(sums, fmt.Sprintf("%s (%d rows)", res.SHA256, res.Rows))
	}
	if sums[0] != sums[1] {
		return fmt.Errorf("the incremental model exports sha256 %s, the full rebuild %s", sums[0], sums[1])
	}
	logf("  incremental and full rebuild export the same bytes: sha256 %s", sums[0])
	return nil
}

// noopProject times `idem run` of a project of 20 jobs (one source and 19
// models over it) when nothing changed: every job is skipped.
func (b *bench) noopProject(ctx context.Context) error {
	dir := filepath.Join(b.dir, "noop-project")
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "models"), 0o755); err != nil {
		return err
	}
	var rows strings.Builder
	rows.WriteString("id,day,zone,amount,ver\n")
	for i := range 1000 {
		fmt.Fprintf(&rows, "%d,%d,%d,%d.50,1\n", i, i%30, i%7, i%100)
	}
	files := map[string]string{"input/sales.csv": rows.String(),
		"sales.toml": strings.Replace(strings.Replace(incrSourceJob, `"unused.duckdb"`, `"data/p.duckdb"`, 1), "path = \"unused.parquet\"\nformat = \"parquet\"", "path = \"input/sales.csv\"", 1)}
	for i := 1; i < 20; i++ {
		name := fmt.Sprintf("m%02d", i)
		up := "sales"
		if i > 10 {
			up = fmt.Sprintf("m%02d", i-10) // a second layer
		}
		files[name+".toml"] = fmt.Sprintf("name = %q\npipeline = \"select\"\ndatabase = \"data/p.duckdb\"\n[input]\nupstream = [%q]\n[transform]\nsql = \"models/%s.sql\"\n[target]\nkey = [\"day\", \"zone\"]\n", name, up, name)
		files["models/"+name+".sql"] = fmt.Sprintf("SELECT day, zone, count(*) + %d AS n FROM {{upstream:%s}} GROUP BY day, zone\n", i, up)
	}
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, name), text); err != nil {
			return err
		}
	}
	m, err := runChild(ctx, "", b.idem, "run", dir, "--quiet")
	if err != nil {
		return err
	}
	logf("noop project: first run of 20 jobs took %.1fs", m.wall.Seconds())
	r := row{name: "no-op project run, 20 jobs (1 source, 19 models)", limit: "none", note: "goal: under 1 s wall"}
	return b.repeat(ctx, r, max(b.reps, 5), "noop project", "run", dir, "--quiet") // cases.go
}
