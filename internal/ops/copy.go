// Writing a query to a file with its sha256, shared by export and diff.

package ops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/source"
)

// copyTo runs COPY (query) TO a temporary file beside out, renames it to out
// and returns the rows written and the file's sha256 and size. progress
// sees the bytes written so far under label; fault, if not nil, is called
// before the rename. Temporary files that killed exports to out left are
// removed first.
func copyTo(ctx context.Context, q catalog.Querier, query, out, format, label string, progress job.Progress, fault func(string)) (int64, string, int64, error) {
	dir := filepath.Dir(out)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return 0, "", 0, fmt.Errorf("export to %s: folder %s does not exist", out, dir)
	}
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return 0, "", 0, fmt.Errorf("export to %s: is a folder (use --partition-by to write a folder)", out)
	}
	if err := cleanExportTemps(out); err != nil {
		return 0, "", 0, err
	}
	tmpName, err := exportTempName(out)
	if err != nil {
		return 0, "", 0, err
	}
	defer os.Remove(tmpName)
	// Hash the file while DuckDB writes it: its COPY writers only append, so
	// the bytes read behind the writer are final. The total is checked
	// against the finished file's size.
	done := make(chan struct{})
	hashed := make(chan tailResult, 1)
	go func() {
		hashed <- tailSHA256(tmpName, done, func(n int64) { progress.Count(label, n, -1) })
	}()
	if format == job.FormatCSV {
		// The canonical export: every value as idem defines it, whatever
		// the engine (catalog.CanonicalCSVQuery).
		if query, err = catalog.CanonicalCSVQuery(ctx, q, query); err != nil {
			return 0, "", 0, fmt.Errorf("export to %s: %w", out, err)
		}
	}
	r, err := q.ExecContext(ctx, "COPY ("+query+") TO "+job.SQLString(tmpName)+" "+copyOptions(format))
	close(done)
	th := <-hashed
	if err != nil {
		return 0, "", 0, fmt.Errorf("export to %s: %w", out, catalog.TrimSQLError(err))
	}
	rows, _ := r.RowsAffected()
	sum, size := th.sum, th.size
	if st, serr := os.Stat(tmpName); th.err != nil || serr != nil || st.Size() != size {
		if sum, size, err = source.FileSHA256(tmpName); err != nil {
			return 0, "", 0, fmt.Errorf("export to %s: %w", out, err)
		}
	}
	if fault != nil {
		fault(FaultExportBeforeSwap)
	}
	if err := os.Rename(tmpName, out); err != nil {
		return 0, "", 0, fmt.Errorf("export to %s: %w", out, err)
	}
	return rows, sum, size, nil
}

type tailResult struct {
	sum  string
	size int64
	err  error
}

// tailSHA256 hashes the file at path as another writer creates and appends
// to it, until done is closed; then it hashes what remains to the end.
// read is told the bytes hashed so far.
func tailSHA256(path string, done <-chan struct{}, read func(int64)) tailResult {
	var f *os.File
	for f == nil {
		var err error
		f, err = os.Open(path)
		if err == nil {
			break
		}
		select {
		case <-done:
			if f, err = os.Open(path); err != nil {
				return tailResult{err: err}
			}
		case <-time.After(2 * time.Millisecond):
		}
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var n int64
	finished := false
	for {
		k, err := f.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			n += int64(k)
			read(n)
			continue
		}
		if err != nil && err != io.EOF {
			return tailResult{err: err}
		}
		if finished {
			return tailResult{sum: hex.EncodeToString(h.Sum(nil)), size: n}
		}
		select {
		case <-done:
			finished = true // one more pass reads what the writer flushed last
		case <-time.After(2 * time.Millisecond):
		}
	}
}
