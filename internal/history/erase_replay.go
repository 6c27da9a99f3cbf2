package history

import (
	"context"
	"encoding/json"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
)

// replayErasure replays recorded erasure e of job j in the scratch
// database of a rerun. idem.erasures keeps the erased value's hash only:
// the value is looked for by that hash in the scratch's tables and erased
// there; where none holds it (the retained inputs were rewritten without
// it) the hash itself is erased, which matches no row, so that the erasure
// is committed and recorded all the same. Either way the scratch records
// e's salt and hash, so that the runs replayed after it match the keys e
// matched. An erasure of a database before catalog version 6 read as it
// is (no salt) holds the value itself.
func replayErasure(ctx context.Context, scratch *run.DB, j *job.Job, e catalog.Erasure) error {
	value := e.Key
	if e.Salt != "" {
		cols := e.Subject
		if len(cols) == 0 {
			cols = keyColumns(j)
		}
		found, err := journalValues(ctx, scratch, j, cols, run.JournalEntry{Salt: e.Salt, SHA256: e.Key}, len(e.Subject) == 0 && len(cols) > 1)
		if err != nil {
			return err
		}
		switch {
		case len(found) > 0:
			value = found[0] // one value has the hash
		case len(e.Subject) == 0 && len(cols) > 1:
			// A composite key is named by the JSON array of its values.
			tuple := make([]string, len(cols))
			for i := range tuple {
				tuple[i] = e.Key
			}
			data, err := json.Marshal(tuple)
			if err != nil {
				return err
			}
			value = string(data)
		}
	}
	opts := EraseOptions{Key: value, Position: e.Position, Replay: true, Recorded: &e}
	if e.Subject != nil {
		opts = EraseOptions{Subject: value, SubjectColumns: e.Subject, Replay: true, Recorded: &e}
	}
	_, err := Erase(ctx, scratch, j, opts)
	return err
}
