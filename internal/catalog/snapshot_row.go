package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
)

// SnapshotRow is one row of idem.snapshots, decoded.
type SnapshotRow struct {
	Job        string
	Snapshot   int64
	Parent     int64
	Kind       string
	BatchID    string
	JobKey     string
	PartsJSON  string
	Inputs     SnapshotInputs
	Columns    []TargetColumn
	KeyColumns []string
}

// SnapshotInputs is the inputs JSON of a snapshot row: the retained files
// (in the order the run read them), their format and the batch bounds. A
// rollback snapshot names the snapshot it restored.
type SnapshotInputs struct {
	Files      []InputRef `json:"files"`
	Format     string     `json:"format,omitempty"`
	Bounds     Bounds     `json:"bounds"`
	RollbackTo *int64     `json:"rollback_to,omitempty"`
	// Partitions are the run's --partitions of a partitioned job.
	Partitions []string `json:"partitions,omitempty"`
	// Rejects are the records of a stream batch that idem could not read
	// as one record: each is a row of no fields in the batch file, and its
	// outcome is the reject's (a rerun tags the same rows).
	Rejects []Reject `json:"rejects,omitempty"`
	// StreamID is the identity of the source a stream batch was read from
	// (a Kafka topic's ID): a later batch from another is refused.
	StreamID string `json:"stream_id,omitempty"`
	// Realigned are the upstreams whose changes a run over upstream changes
	// took over the job's newer rows (the upstream was rolled back below
	// what the job applied): a rerun does the same.
	Realigned []string `json:"realigned,omitempty"`
	// Incremental is an incremental model's [target] incremental: its
	// snapshot holds the rows of the model rebuilt whole from the upstream
	// rows it pinned, so its rerun replays it alone, whether the run
	// recomputed some partitions (keys) or every row.
	Incremental string `json:"incremental,omitempty"`
}

// Reject is one stream record read as an invalid_* outcome: row Row (from
// 1) of the batch, from Partition at Position (an SSE event id), Bytes
// long, of which Prefix quotes the first bytes (RejectPrefix; "" once an
// erasure matched it).
type Reject struct {
	Row       int64  `json:"row"`
	Partition string `json:"partition"`
	Position  int64  `json:"position"`
	Outcome   string `json:"outcome"`
	Bytes     int    `json:"bytes"`
	Prefix    string `json:"prefix"`
	// Why says what made a record of this outcome invalid where the
	// outcome alone does not (a tombstone's message key), for the run's
	// message; it is not kept with the snapshot.
	Why string `json:"-"`
}

// RejectPrefix is how many bytes of a rejected record are kept.
const RejectPrefix = 64

// Bounds are a batch's source positions (From, To], both nil when the run
// gave none.
type Bounds struct {
	From *int64 `json:"from"`
	To   *int64 `json:"to"`
}

// InputRef names one retained input file by content.
type InputRef struct {
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	Name   string `json:"name"`
}

// Parts decodes the snapshot's job key parts.
func (s *SnapshotRow) Parts() (jobkey.Parts, error) { return jobkey.ParseParts(s.PartsJSON) }

const snapshotColumns = `job, snapshot, parent, kind, batch_id, job_key, parts, inputs, columns, key_columns`

func scanSnapshot(scan func(...any) error) (*SnapshotRow, error) {
	var s SnapshotRow
	var batch, key, parts, inputs, cols, keys sql.NullString
	if err := scan(&s.Job, &s.Snapshot, &s.Parent, &s.Kind, &batch, &key, &parts, &inputs, &cols, &keys); err != nil {
		return nil, err
	}
	s.BatchID, s.JobKey, s.PartsJSON = batch.String, key.String, parts.String
	if inputs.Valid && inputs.String != "" {
		if err := json.Unmarshal([]byte(inputs.String), &s.Inputs); err != nil {
			return nil, fmt.Errorf("snapshot %d of %s: inputs: %w", s.Snapshot, s.Job, err)
		}
	}
	if cols.Valid && cols.String != "" {
		if err := json.Unmarshal([]byte(cols.String), &s.Columns); err != nil {
			return nil, fmt.Errorf("snapshot %d of %s: columns: %w", s.Snapshot, s.Job, err)
		}
	}
	if keys.Valid && keys.String != "" {
		if err := json.Unmarshal([]byte(keys.String), &s.KeyColumns); err != nil {
			return nil, fmt.Errorf("snapshot %d of %s: key columns: %w", s.Snapshot, s.Job, err)
		}
	}
	return &s, nil
}

// ReadSnapshot reads one snapshot row of job. A snapshot that does not exist
// is a usage error naming the latest one.
func ReadSnapshot(ctx context.Context, q Querier, j string, snapshot int64) (*SnapshotRow, error) {
	row := q.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM idem.snapshots WHERE job = ? AND snapshot = ?`, j, snapshot)
	s, err := scanSnapshot(row.Scan)
	if errors.Is(err, sql.ErrNoRows) {
		st, serr := ReadState(ctx, q, j)
		if serr != nil {
			return nil, serr
		}
		return nil, report.Usage("job %s has no snapshot %d (latest is %d)", j, snapshot, st.Snapshot)
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot %d of %s: %w", snapshot, j, err)
	}
	return s, nil
}

// ReadSnapshots reads the snapshot rows of job up to and including upTo, in
// order.
func ReadSnapshots(ctx context.Context, q Querier, j string, upTo int64) ([]*SnapshotRow, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+snapshotColumns+` FROM idem.snapshots WHERE job = ? AND snapshot <= ? ORDER BY snapshot`, j, upTo)
	if err != nil {
		return nil, fmt.Errorf("read snapshots of %s: %w", j, err)
	}
	defer rows.Close()
	var out []*SnapshotRow
	for rows.Next() {
		s, err := scanSnapshot(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// ResolveSnapshot returns the snapshot a pinned read means: want, or the
// job's latest when want is 0, with the latest. An expired snapshot is
// refused (exit 3, ExpiredError): every pinned read passes here.
func ResolveSnapshot(ctx context.Context, q Querier, j string, want int64) (snapshot, latest int64, err error) {
	st, err := ReadState(ctx, q, j)
	if err != nil {
		return 0, 0, err
	}
	if st.Snapshot == 0 {
		return 0, 0, report.Usage("job %s has no snapshot yet: run it first", j)
	}
	if want == 0 {
		return st.Snapshot, st.Snapshot, nil
	}
	if want < 0 || want > st.Snapshot {
		return 0, 0, report.Usage("job %s has no snapshot %d (latest is %d)", j, want, st.Snapshot)
	}
	if err := CheckNotExpired(ctx, q, j, want); err != nil {
		return 0, 0, err
	}
	return want, st.Snapshot, nil
}
