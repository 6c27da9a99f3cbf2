package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// CSVCopyOptions are the COPY options of a CSV export. The release packet
// hashes a partition's rows written with them, so its sha256 is the one a
// pinned CSV export of that partition gives.
const CSVCopyOptions = "(FORMAT csv, HEADER true, DELIMITER ',', QUOTE '\"', ESCAPE '\"', NULLSTR '')"

// Packet is the release packet of one snapshot, idem.packets (a view of
// idem.snapshots' packet column since catalog version 9): what a committed
// run wrote, recorded with its snapshot row.
type Packet struct {
	Job              string           `json:"job"`
	Snapshot         int64            `json:"snapshot"`
	Parent           int64            `json:"parent"`
	JobKey           string           `json:"job_key"`
	Parts            json.RawMessage  `json:"parts"`
	Pipeline         string           `json:"pipeline"`
	TransformVersion int              `json:"transform_version"`
	SchemaVersion    int              `json:"schema_version"`
	Inputs           []InputRef       `json:"inputs"`
	RowsIn           int64            `json:"rows_in"`
	Outcomes         map[string]int64 `json:"outcomes"`
	Key              []string         `json:"key"`
	// PartitionBy is the job's partition column; empty for a job without
	// one, whose packet has one entry for the whole target.
	PartitionBy string        `json:"partition_by,omitempty"`
	Entries     []PacketEntry `json:"entries"`
	// PayloadVersions counts the run's input rows by payload schema
	// version, for a pipeline whose outcomes keep a schema_version column
	// (orders): "2" -> rows.
	PayloadVersions map[string]int64 `json:"payload_versions,omitempty"`
	// Erasures are the erasures that changed this snapshot's rows after it
	// was committed, each with the entries it replaced: Entries describe
	// the rows as they are now.
	Erasures []PacketErasure `json:"erasures,omitempty"`
}

// PacketErasure is one erasure that rewrote a snapshot's rows: the
// snapshot of the job that records it, and the entries the packet had
// before (their rows and sha256).
type PacketErasure struct {
	Snapshot int64         `json:"snapshot"`
	Replaced []PacketEntry `json:"replaced"`
}

// PacketEntry describes one partition the run touched (or, Partition nil
// and Whole set, the whole target) as committed.
type PacketEntry struct {
	Partition *string `json:"partition"`
	Whole     bool    `json:"whole_target,omitempty"`
	// Repaired marks a partition the run touched only to remove keys that
	// moved into a replaced partition.
	Repaired     bool  `json:"repaired,omitempty"`
	Rows         int64 `json:"rows"`
	DistinctKeys int64 `json:"distinct_keys"`
	// Bounds are the min and max, as text, of each key column and the
	// partition column; null for an empty partition.
	Bounds map[string][2]*string `json:"bounds"`
	// SHA256 and Bytes are those of the entry's rows written as a CSV
	// export writes them (CSVCopyOptions, the snapshot's columns, key
	// order, header included): equal to the file of `idem export
	// --snapshot S --format csv --partition-by COL` for this partition,
	// or of `idem export --snapshot S --format csv` for the whole target.
	// A whole-target entry is committed without them, nor its
	// DistinctKeys (SHA256 empty, see Pending): they are computed from
	// the snapshot's rows when asked.
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// Pending says the entry's sha256, bytes and distinct keys were not
// computed when it was written: the run that committed a whole target
// leaves them to its readers (inspect.Show), who compute them from the
// snapshot's pinned rows, so that a commit costs in proportion to its
// change. An erasure leaves a pending entry pending, so no stored sha256
// ever covers erased rows.
func (e *PacketEntry) Pending() bool { return e.SHA256 == "" }

// ErrNoPacket is returned by ReadPacket for a snapshot without a packet
// (a rollback or an erasure, or one committed before packets existed).
var ErrNoPacket = errors.New("no release packet")

// ReplacePacket writes p over the packet of its snapshot.
func ReplacePacket(ctx context.Context, tx *sql.Tx, p *Packet) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE idem.snapshots SET packet = ? WHERE job = ? AND snapshot = ?`, string(data), p.Job, p.Snapshot); err != nil {
		return fmt.Errorf("rewrite the release packet of snapshot %d of %s: %w", p.Snapshot, p.Job, TrimSQLError(err))
	}
	return nil
}

// PacketSnapshots lists the snapshots of job j that have a packet.
func PacketSnapshots(ctx context.Context, q Querier, j string) ([]int64, error) {
	rows, err := q.QueryContext(ctx, `SELECT snapshot FROM idem.packets WHERE job = ? ORDER BY snapshot`, j)
	if err != nil {
		return nil, fmt.Errorf("list the release packets of %s: %w", j, TrimSQLError(err))
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// EncodePacket is p as its snapshot row records it (NewSnapshot.Packet).
func EncodePacket(p *Packet) (string, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("record the release packet of %s: %w", p.Job, err)
	}
	return string(data), nil
}

// ReadPacket reads the packet of a job's snapshot; ErrNoPacket when it has
// none.
func ReadPacket(ctx context.Context, q Querier, jobName string, snapshot int64) (*Packet, error) {
	var data string
	err := q.QueryRowContext(ctx, `SELECT packet FROM idem.packets WHERE job = ? AND snapshot = ?`, jobName, snapshot).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("snapshot %d of %s: %w", snapshot, jobName, ErrNoPacket)
	}
	if err != nil {
		return nil, fmt.Errorf("read the release packet of %s: %w", jobName, TrimSQLError(err))
	}
	var p Packet
	if err := json.Unmarshal([]byte(data), &p); err != nil {
		return nil, fmt.Errorf("release packet of snapshot %d of %s: %w", snapshot, jobName, err)
	}
	return &p, nil
}

// ScrubPackets removes an erased key from the release packets of a job, in
// the erasure's transaction: a min or max of a key column equal to it
// becomes null. The sha256 figures stay: they are digests, not copies.
func ScrubPackets(ctx context.Context, tx *sql.Tx, jobName string, keyColumns []string, key string) error {
	rows, err := tx.QueryContext(ctx, `SELECT snapshot, packet FROM idem.packets WHERE job = ? AND contains(packet, ?) ORDER BY snapshot`, jobName, key)
	if err != nil {
		return fmt.Errorf("scrub the release packets of %s: %w", jobName, TrimSQLError(err))
	}
	type row struct {
		snapshot int64
		data     string
	}
	var found []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.snapshot, &r.data); err != nil {
			rows.Close()
			return err
		}
		found = append(found, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range found {
		var p Packet
		if err := json.Unmarshal([]byte(r.data), &p); err != nil {
			return fmt.Errorf("release packet of snapshot %d of %s: %w", r.snapshot, jobName, err)
		}
		for _, e := range p.Entries {
			for _, c := range keyColumns {
				b := e.Bounds[c]
				for i := range b {
					if b[i] != nil && *b[i] == key {
						b[i] = nil
					}
				}
				e.Bounds[c] = b
			}
		}
		data, err := json.Marshal(&p)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE idem.snapshots SET packet = ? WHERE job = ? AND snapshot = ?`, string(data), jobName, r.snapshot); err != nil {
			return fmt.Errorf("scrub the release packets of %s: %w", jobName, TrimSQLError(err))
		}
	}
	return nil
}
