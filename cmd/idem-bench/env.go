package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// The env case: a chain src (merge_by_key of an n-row CSV) → mid (a model
// of 1,000 rows over it) → top (a model over mid). mid's model is edited;
// idem run --env dev builds mid and top beside production, reading src
// from production, against a full rebuild of the edited project in a new
// database (the floor column). The note gives both databases' sizes.
func (b *bench) envCase(ctx context.Context) error {
	dir := filepath.Join(b.dir, "env")
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "input"), 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "input", "src.csv"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "id,grp,amount")
	for i := int64(1); i <= b.n; i++ {
		fmt.Fprintf(w, "%d,%d,%d\n", i, i%1000, (i*7919)%101)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	model := func(sql string) error {
		return writeFile(filepath.Join(dir, "models", "mid.sql"), sql+"\n")
	}
	files := map[string]string{
		"src.toml":       "name = \"src\"\npipeline = \"merge_by_key\"\ntransform_version = 1\nschema_version = 1\ndatabase = \"data/p.duckdb\"\n[input]\npath = \"input/src.csv\"\n[input.columns]\nid = \"BIGINT\"\ngrp = \"INTEGER\"\namount = \"BIGINT\"\n[target]\nkey = [\"id\"]\n",
		"mid.toml":       "name = \"mid\"\npipeline = \"select\"\ndatabase = \"data/p.duckdb\"\n[input]\nupstream = [\"src\"]\n[transform]\nsql = \"models/mid.sql\"\n[target]\nkey = [\"grp\"]\n",
		"top.toml":       "name = \"top\"\npipeline = \"select\"\ndatabase = \"data/p.duckdb\"\n[input]\nupstream = [\"mid\"]\n[transform]\nsql = \"models/top.sql\"\n[target]\nkey = [\"bucket\"]\n",
		"models/top.sql": "SELECT grp % 10 AS bucket, sum(total) AS total FROM {{upstream:mid}} GROUP BY ALL\n",
	}
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, name), text); err != nil {
			return err
		}
	}
	if err := model("SELECT grp, sum(amount) AS total FROM {{upstream:src}} GROUP BY grp"); err != nil {
		return err
	}
	m, err := runChild(ctx, "", b.idem, "run", dir, "--quiet")
	if err != nil {
		return err
	}
	logf("env: production built in %.1fs", m.wall.Seconds())
	if err := model("SELECT grp, sum(amount) AS total, count(*) AS n FROM {{upstream:src}} GROUP BY grp"); err != nil {
		return err
	}
	prod := filepath.Join(dir, "data", "p.duckdb")
	r := row{name: fmt.Sprintf("environment build, 2 of 3 jobs (src %d rows read from production)", b.n), limit: "none", n: b.n, floorName: "full rebuild of the edited project"}
	var envBytes, fullBytes int64
	for rep := 0; rep < b.reps; rep++ {
		os.RemoveAll(prod + ".envs")
		m, err := runChild(ctx, "", b.idem, "run", dir, "--env", "dev", "--quiet")
		if err != nil {
			return err
		}
		r.idem = append(r.idem, m)
		envBytes = dirBytes(prod + ".envs")
		full := filepath.Join(b.dir, "env-full")
		os.RemoveAll(full)
		for _, name := range []string{"src.toml", "mid.toml", "top.toml", "models/mid.sql", "models/top.sql", "input/src.csv"} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(full, name)), 0o755); err != nil {
				return err
			}
			if err := copyFile(filepath.Join(dir, name), filepath.Join(full, name)); err != nil {
				return err
			}
		}
		m, err = runChild(ctx, "", b.idem, "run", full, "--quiet")
		if err != nil {
			return err
		}
		r.floor = append(r.floor, m)
		fullBytes = dirBytes(filepath.Join(full, "data"))
	}
	r.note = fmt.Sprintf("disk: environment %s, full rebuild %s (database and retained input)", human(envBytes), human(fullBytes))
	logf("env: %s", r.note)
	b.rows = append(b.rows, r)
	return nil
}
