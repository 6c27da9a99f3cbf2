package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
)

//go:embed floor_apply.sql
var floorApplySQL string

//go:embed floor_refresh.sql
var floorRefreshSQL string

// child runs one floor measurement in its own process:
//
//	child apply|refresh|export|sha256|gen|fingerprint|query|project|project-pin [flags]
func child(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("child needs a kind")
	}
	kind := args[0]
	fl := flag.NewFlagSet(kind, flag.ContinueOnError)
	dbPath := fl.String("db", "", "database")
	input := fl.String("input", "", "input file")
	batch := fl.String("batch-id", "", "batch id")
	out := fl.String("out", "", "export file")
	text := fl.String("sql", "", "gen: which file (batch, base, sample, sample-b, noop); fingerprint, query: the query")
	rows := fl.Int64("n", 0, "gen: rows")
	memoryLimit := fl.String("memory-limit", "", "DuckDB memory_limit")
	threads := fl.String("threads", "", "DuckDB threads (default: DuckDB's)")
	tempDir := fl.String("temp-directory", "", "DuckDB temp_directory")
	scriptFile := fl.String("script", "", "apply, refresh: run this SQL file instead of the built-in floor script (for trying a variant)")
	trace := fl.Bool("trace", false, "apply, refresh: run the script one statement at a time and print each one's time on stderr")
	project := fl.String("project", "", "project: the project folder")
	phase := fl.String("phase", "", "project: full, nightly or noop (projectfloor.go)")
	noHistory := fl.Bool("no-history", false, "apply: leave out the floor script's history statements (the history case's hand-written floor without history)")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	switch kind {
	case "gen":
		return generateHere(ctx, *text, *rows, *out)
	case "fingerprint":
		db, err := openRO(*dbPath)
		if err != nil {
			return err
		}
		defer db.Close()
		fp, err := fingerprint(ctx, db, *text)
		if err != nil {
			return err
		}
		fmt.Println(fp)
		return nil
	case "query":
		db, err := openRO(*dbPath)
		if err != nil {
			return err
		}
		defer db.Close()
		var v string
		if err := db.QueryRowContext(ctx, *text).Scan(&v); err != nil {
			return err
		}
		fmt.Println(v)
		return nil
	case "changes":
		db, err := openRO(*dbPath)
		if err != nil {
			return err
		}
		defer db.Close()
		return changesChild(ctx, db)
	}
	if kind == "sha256" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.CopyBuffer(h, f, make([]byte, 1<<20)); err != nil {
			return err
		}
		fmt.Println(hex.EncodeToString(h.Sum(nil)))
		return nil
	}
	q := url.Values{}
	if *memoryLimit != "" {
		q.Set("memory_limit", *memoryLimit)
	}
	if *tempDir != "" {
		q.Set("temp_directory", *tempDir)
	}
	if *threads != "" {
		q.Set("threads", *threads)
	}
	db, err := sql.Open("duckdb", *dbPath+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	switch kind {
	case "project":
		return projectFloor(ctx, conn, *project, *phase)
	case "project-pin":
		return pinCost(ctx, conn, 5) // projectpin.go

	case "export":
		_, err := conn.ExecContext(ctx, "COPY (SELECT * FROM changes ORDER BY entity_id) TO "+quote(*out)+" (FORMAT csv, HEADER true)")
		return err
	case "apply", "refresh":
		script := floorApplySQL
		if kind == "refresh" {
			script = floorRefreshSQL
		}
		if *scriptFile != "" {
			b, err := os.ReadFile(*scriptFile)
			if err != nil {
				return err
			}
			script = string(b)
		}
		if *noHistory {
			var err error
			if script, err = withoutHistory(script); err != nil {
				return err
			}
		}
		vars := map[string]string{"input": *input, "batch_id": *batch, "job": "bench_" + map[string]string{"apply": "changes", "refresh": "sample"}[kind]}
		for k, v := range vars {
			if _, err := conn.ExecContext(ctx, "SET VARIABLE "+k+" = ?", v); err != nil {
				return err
			}
		}
		if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
			return err
		}
		if err := execScript(ctx, conn, script, *trace); err != nil {
			_, _ = conn.ExecContext(ctx, "ROLLBACK")
			return err
		}
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			return err
		}
		_, err = conn.ExecContext(ctx, "CHECKPOINT")
		return err
	}
	return fmt.Errorf("unknown child kind %q", kind)
}

// execScript runs a floor script whole, or, traced, one statement at a time
// (the scripts hold no semicolon inside a literal) with each one's time.
func execScript(ctx context.Context, conn *sql.Conn, script string, trace bool) error {
	if !trace {
		_, err := conn.ExecContext(ctx, script)
		return err
	}
	for _, stmt := range strings.Split(script, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		start := time.Now()
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return err
		}
		first := strings.TrimSpace(stmt)
		for strings.HasPrefix(first, "--") {
			_, first, _ = strings.Cut(first, "\n")
			first = strings.TrimSpace(first)
		}
		first, _, _ = strings.Cut(first, "\n")
		fmt.Fprintf(os.Stderr, "%8.2fs  %s\n", time.Since(start).Seconds(), first)
	}
	return nil
}

// Markers around the floor script's history statements.
const (
	historyStart = "-- History:"
	historyEnd   = "-- Bookkeeping rows."
)

// withoutHistory is an apply floor script without its history statements:
// the same decisions, target, outcome and bookkeeping rows, and no history
// row written.
func withoutHistory(script string) (string, error) {
	i := strings.Index(script, historyStart)
	j := strings.Index(script, historyEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("the floor script has no %q ... %q section to leave out", historyStart, historyEnd)
	}
	return script[:i] + script[j:], nil
}
