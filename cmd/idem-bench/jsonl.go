package main

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The jsonl case: n JSON Lines changes on n entities (one change each)
// applied to a fresh database, by `idem run` of the versioned_changes
// pipeline against the row-by-row SQLite program of the seed
// incremental-idempotent-pipelines.txt (seed_apply.py: the seed's
// database() and apply(), run by python3 on an on-disk SQLite file, a fresh
// one per repetition). Both read the same file; after the repetitions the
// two final states must be the same rows, or the case fails.

//go:embed seed_apply.py
var seedApplyPy string

const jsonlJob = `name = "bench_jsonl"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = "unused.duckdb"

[input]
path = "unused.jsonl"
format = "jsonl"

[target]
table = "changes"
`

// writeJSONL writes n changes, one per entity ent-0 .. ent-(n-1): version
// 1-5, 15% deletes (value null), otherwise an integer value (the seed's
// rows carry integer values; idem reads it as the text of the number).
// An existing file is reused: its bytes depend on n alone.
func writeJSONL(path string, n int64) error {
	return writeOnce(path, func(w *bufio.Writer) {
		for r := range n {
			h := fnv.New64a()
			fmt.Fprint(h, r)
			x := h.Sum64()
			version := 1 + x%5
			if (x>>8)%100 < 15 {
				fmt.Fprintf(w, `{"change_id":"c-%d","entity_id":"ent-%d","source_version":%d,"operation":"delete","value":null}`+"\n", r, r, version)
			} else {
				fmt.Fprintf(w, `{"change_id":"c-%d","entity_id":"ent-%d","source_version":%d,"operation":"upsert","value":%d}`+"\n", r, r, version, (x>>16)%1_000_000)
			}
		}
	})
}

// stateDigestSQL is the text seed_apply.py's digest hashes, built from
// idem's target: one "id,version,value,deleted" line per entity in id
// order ("None" for a deleted row's value, as Python prints it).
const stateDigestSQL = `SELECT count(*) || ' rows, sha256 ' || sha256(coalesce(string_agg(
    entity_id || ',' || source_version || ',' || coalesce(value, 'None') || ',' || CAST(status = 'deleted' AS INTEGER) || chr(10),
    '' ORDER BY entity_id), '')) FROM changes`

func (b *bench) jsonlCase(ctx context.Context) error {
	name := fmt.Sprintf("apply %d JSONL changes, fresh database", b.n)
	python, err := exec.LookPath("python3")
	if err != nil {
		logf("jsonl: python3 not found, the seed's SQLite program cannot run: skipped")
		b.rows = append(b.rows, row{name: name + " (no python3)", unavailable: true})
		return nil
	}
	dir := filepath.Join(b.dir, fmt.Sprintf("jsonl-%d", b.n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	input := filepath.Join(dir, "changes.jsonl")
	job := filepath.Join(dir, "job.toml")
	program := filepath.Join(dir, "seed_apply.py")
	logf("jsonl N=%d: generating %s", b.n, input)
	if err := writeJSONL(input, b.n); err != nil {
		return err
	}
	if err := writeFile(job, jsonlJob); err != nil {
		return err
	}
	if err := writeFile(program, seedApplyPy); err != nil {
		return err
	}
	idemDB := filepath.Join(dir, "run-idem.duckdb")
	sqliteDB := filepath.Join(dir, "run-seed.sqlite")
	removeSQLite := func() {
		for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
			os.Remove(sqliteDB + suffix)
		}
	}
	r := &row{name: name, n: b.n, limit: "none", floorName: "seed's row-by-row SQLite program (python3, on-disk file)"}
	runIdem := func(int) (measure, error) {
		removeDB(idemDB)
		return runChild(ctx, "", b.idem, "run", job, "--db", idemDB, "--input", input, "--batch-id", "B1", "--quiet")
	}
	runSeed := func(int) (measure, error) {
		removeSQLite()
		return runChild(ctx, "", python, program, "apply", input, sqliteDB)
	}
	if err := b.pair(ctx, r, runIdem, runSeed); err != nil {
		return err
	}
	b.rows[len(b.rows)-1].note = speedups(r.idem, r.floor)
	logf("jsonl: %s", b.rows[len(b.rows)-1].note)

	out, err := exec.CommandContext(ctx, python, program, "digest", sqliteDB).CombinedOutput()
	if err != nil {
		return fmt.Errorf("digest of the SQLite state: %v: %s", err, out)
	}
	seed := strings.TrimSpace(string(out))
	out, err = exec.CommandContext(ctx, b.self, "child", "query", "--db", idemDB, "--sql", stateDigestSQL).CombinedOutput()
	if err != nil {
		return fmt.Errorf("digest of idem's target: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != seed {
		return fmt.Errorf("idem and the seed's program disagree on the final state: idem %s, SQLite %s", got, seed)
	}
	logf("  idem and the seed's program agree on the state: %s", seed)
	removeDB(idemDB)
	removeSQLite()
	return nil
}

// speedups is the per-repetition ratio of the seed program's time to
// idem's (wall and CPU) and their medians: how many times faster idem is.
func speedups(idem, seed []measure) string {
	var wall, cpu []float64
	var wallReps, cpuReps []string
	for i := range idem {
		w := seed[i].wall.Seconds() / idem[i].wall.Seconds()
		c := seed[i].cpu.Seconds() / idem[i].cpu.Seconds()
		wall, cpu = append(wall, w), append(cpu, c)
		wallReps, cpuReps = append(wallReps, fmt.Sprintf("%.2fx", w)), append(cpuReps, fmt.Sprintf("%.2fx", c))
	}
	wm, _, _ := medianMinMax(wall)
	cm, _, _ := medianMinMax(cpu)
	return fmt.Sprintf("SQLite time / idem time: wall %.2fx median (per rep %s), CPU %.2fx median (per rep %s)",
		wm, strings.Join(wallReps, ", "), cm, strings.Join(cpuReps, ", "))
}
