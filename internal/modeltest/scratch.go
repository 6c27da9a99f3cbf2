package modeltest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
)

// scratch is the temporary folder of a Run: a new, empty idem database
// made once (template.duckdb), of which each test opens a copy of its
// own. Making a database (idem's own tables, a checkpoint) takes about ten
// times as long as copying and opening one.
type scratch struct {
	dir, template string
}

// newScratch makes the temporary folder and the empty database.
func newScratch(ctx context.Context) (*scratch, error) {
	dir, err := os.MkdirTemp("", "idem-test-*")
	if err != nil {
		return nil, fmt.Errorf("scratch folder: %w", err)
	}
	s := &scratch{dir: dir, template: filepath.Join(dir, "template.duckdb")}
	db, err := run.Open(ctx, s.template, run.OpenOptions{Journal: run.JournalSkip})
	if err == nil {
		err = db.Close()
	}
	if err == nil {
		if _, statErr := os.Stat(s.template + ".wal"); statErr == nil {
			err = fmt.Errorf("%s.wal is left after close", s.template)
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("scratch database: %w", err)
	}
	return s, nil
}

func (s *scratch) close() { os.RemoveAll(s.dir) }

// open opens a copy of the empty database in a folder of its own, with
// model m's memory limit; release closes and removes it.
func (s *scratch) open(ctx context.Context, m *job.Job) (db *run.DB, dir string, release func(), err error) {
	dir, err = os.MkdirTemp(s.dir, "test-*")
	if err != nil {
		return nil, "", nil, fmt.Errorf("scratch folder: %w", err)
	}
	path := filepath.Join(dir, "test.duckdb")
	if err = copyFile(s.template, path); err == nil {
		db, err = run.Open(ctx, path, run.OpenOptions{Journal: run.JournalSkip,
			DuckDB: job.DuckDBSettings{MemoryLimit: m.DuckDB.MemoryLimit, TempDirectory: filepath.Join(dir, "tmp")}})
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, fmt.Errorf("scratch database: %w", err)
	}
	return db, dir, func() {
		db.Close() // thrown away with its folder: its close loses nothing
		os.RemoveAll(dir)
	}, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
