package history

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/dbfile"
	"github.com/idem-dev/idem/internal/run"
)

// An erasure deletes rows, and DuckDB leaves the bytes of deleted rows in
// the file's free blocks until they are written over: only a rewrite of
// the file (Compact) leaves no byte of the subject in it. idem erase
// compacts by itself after the erasure commits, unless told not to (a
// file too large to rewrite now).

// CompactAfterErasure compacts the database d after an erasure committed
// in it (Compact: the file rewritten, checked and swapped in, the read
// replica published again) and opens it again in d, so that the caller
// goes on with it (publishers, the close). The erasure stands whatever
// happens here: an error says the file was not compacted (run idem compact)
// or could not be opened again.
func CompactAfterErasure(ctx context.Context, d *run.DB, opts dbfile.CompactOptions) (*dbfile.CompactResult, error) {
	path := d.Path()
	res, err := dbfile.Compact(ctx, d, opts)
	if err != nil {
		err = fmt.Errorf("the erasure is committed, but the database file was not compacted, so its free blocks may still hold the erased rows' bytes (run idem compact --db %s): %w", path, err)
	}
	if rerr := d.Reopen(ctx); rerr != nil {
		return res, errors.Join(err, fmt.Errorf("the erasure is committed; open %s again after compact: %w", path, rerr))
	}
	return res, err
}

// Changed says the erasure committed a change: an erasure that found the
// subject erased before, or a dry run, changed nothing.
func (r *ChainEraseResult) Changed() bool { return !r.DryRun && r.changes() > 0 }
