// Writing a query to a file with its sha256, shared by export and diff.

package export

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// CopyTo runs COPY (query) TO a temporary file beside out, renames it to out
// and returns the rows written and the file's sha256 and size. progress
// sees the bytes written so far under label; fault, if not nil, is called
// before the rename. Temporary files that killed exports to out left are
// removed first.
func CopyTo(ctx context.Context, q catalog.Querier, query, out, format, label string, progress report.Progress, fault func(string)) (int64, string, int64, error) {
	return copyQuery(ctx, q, query, out, format, label, progress, fault, false)
}

// copyQuery is CopyTo; with unsignedZero a CSV writes -0.0 as 0.0
// (catalog.UnsignedZeroCSVQuery).
func copyQuery(ctx context.Context, q catalog.Querier, query, out, format, label string, progress report.Progress, fault func(string), unsignedZero bool) (int64, string, int64, error) {
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
	if format == job.FormatCSV {
		// The canonical export: every value as idem defines it, whatever
		// the engine (catalog.CanonicalCSVQuery).
		canonical := catalog.CanonicalCSVQuery
		if unsignedZero {
			canonical = catalog.UnsignedZeroCSVQuery
		}
		if query, err = canonical(ctx, q, query); err != nil {
			return 0, "", 0, fmt.Errorf("export to %s: %w", out, err)
		}
	}
	if format == job.FormatParquet {
		// Every value as it is (ParquetTypes), or an error.
		if query, err = exactParquetQuery(ctx, q, query); err != nil {
			return 0, "", 0, fmt.Errorf("export to %s: %w", out, err)
		}
	}
	// The sha256 is taken over the finished file: DuckDB 2.0 writes a
	// COPY's file from several threads at once, each pwrite at its own
	// offset, so bytes read behind the writer may be a hole not yet
	// filled (1.5.6 only appended, and the file was hashed as it grew).
	// Meanwhile progress sees the file's size.
	done := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		pollSize(tmpName, done, func(n int64) { progress.Count(label, n, -1) })
	}()
	r, err := q.ExecContext(ctx, "COPY ("+query+") TO "+sqltext.SQLString(tmpName)+" "+copyOptions(format))
	close(done)
	<-polled
	if err != nil {
		return 0, "", 0, fmt.Errorf("export to %s: %w", out, catalog.TrimSQLError(err))
	}
	rows, _ := r.RowsAffected()
	sum, size, err := source.FileSHA256(tmpName)
	if err != nil {
		return 0, "", 0, fmt.Errorf("export to %s: %w", out, err)
	}
	progress.Count(label, size, -1)
	if fault != nil {
		fault(FaultExportBeforeSwap)
	}
	if err := os.Rename(tmpName, out); err != nil {
		return 0, "", 0, fmt.Errorf("export to %s: %w", out, err)
	}
	return rows, sum, size, nil
}

// pollSize tells read the size of the file at path, which another writer
// creates and writes, every 50 ms until done is closed.
func pollSize(path string, done <-chan struct{}, read func(int64)) {
	var last int64
	for {
		select {
		case <-done:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if st, err := os.Stat(path); err == nil && st.Size() != last {
			last = st.Size()
			read(last)
		}
	}
}
