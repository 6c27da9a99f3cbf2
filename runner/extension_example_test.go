package runner_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/runner"
)

// ExampleProject_OpenReader reads what a job committed as an extension
// does (the Iceberg publisher): the kept snapshots with their job keys
// and columns, a snapshot pinned in a read transaction and copied to a
// Parquet file with the extension's own SQL, the canonical export of it,
// and the rows of that file read back as the same canonical CSV: the
// sha256s match.
func ExampleProject_OpenReader() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	r, err := p.OpenReader(ctx, "src", runner.ReaderOptions{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	kept, err := r.Snapshots(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range kept.Snapshots {
		fmt.Println("snapshot", s.Snapshot, s.Kind, "job key set:", s.JobKey != "", "columns", s.Columns, "key", s.Key)
	}
	fmt.Println("database id set:", kept.DatabaseID != "", "last erasure", kept.LastErasure)

	tmp, err := r.TempDir()
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	tx, err := r.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Close()
	first, err := tx.Table(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	pq := filepath.Join(tmp, "s1.parquet")
	if _, err := tx.Tx().ExecContext(ctx, "COPY ("+first.Query+") TO "+runner.QuoteString(pq)+" (FORMAT parquet)"); err != nil {
		log.Fatal(runner.TrimSQLError(err))
	}
	want, err := r.Export(ctx, runner.ExportOptions{Snapshot: 1, Out: filepath.Join(tmp, "want.csv"),
		BeforeRename: func() { fmt.Println("export complete, not yet renamed") }})
	if err != nil {
		log.Fatal(err)
	}

	duck, err := sql.Open("duckdb", "")
	if err != nil {
		log.Fatal(err)
	}
	defer duck.Close()
	got := filepath.Join(tmp, "got.csv")
	if err := runner.CanonicalCSV(ctx, duck, "SELECT * FROM read_parquet("+runner.QuoteString(pq)+") ORDER BY "+runner.QuoteIdent(first.Key[0]), got); err != nil {
		log.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("snapshot %d: %d rows; read back equal: %v\n", want.Snapshot, want.Rows, fmt.Sprintf("%x", sha256.Sum256(b)) == want.SHA256)
	// An error's text is idem's, no job's name put before it: the
	// extension names the job in its own messages.
	if _, err := tx.Table(ctx, 9); err != nil {
		fmt.Printf("exit %d: %v\n", runner.ExitCode(err), err)
	}
	// Output:
	// snapshot 1 applied job key set: true columns [{id BIGINT} {day DATE} {idem_status VARCHAR}] key [id]
	// snapshot 2 applied job key set: true columns [{id BIGINT} {day DATE} {idem_status VARCHAR}] key [id]
	// database id set: true last erasure 0
	// export complete, not yet renamed
	// snapshot 1: 2 rows; read back equal: true
	// exit 2: job src has no snapshot 9 (latest is 2)
}

// ExampleRefuse makes an extension's refusal, which the idem command
// reports with exit code 3, and its usage error (exit 2).
func ExampleRefuse() {
	err := runner.Refuse("history", "Iceberg table %s was published from another history", "ns.src")
	fmt.Println(err)
	fmt.Println(runner.ExitCode(err), errors.Is(err, runner.ErrRefused))
	err = runner.Usage("%s declares no [publish.iceberg]", "src")
	fmt.Println(err)
	fmt.Println(runner.ExitCode(err), errors.Is(err, runner.ErrUsage))
	fmt.Println(runner.QuoteIdent(`a"b`), runner.QuoteString("it's"), runner.Thousands(1234567))
	// Output:
	// refused: Iceberg table ns.src was published from another history
	// 3 true
	// src declares no [publish.iceberg]
	// 2 true
	// "a""b" 'it''s' 1,234,567
}
