// What an extension (the Iceberg publisher) reads of a job's database
// through runner's Reader: the kept snapshots with the database's id, a
// folder for its temporary exports, and the canonical CSV of a query it
// reads back.

package inspect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
)

// KeptSnapshots are the snapshots of a job its database keeps (not
// expired), in order, with the database's id and the job's last erasure.
type KeptSnapshots struct {
	DatabaseID  string         `json:"database_id"`
	Snapshots   []KeptSnapshot `json:"snapshots"`
	LastErasure int64          `json:"last_erasure"`
}

// KeptSnapshot is one kept snapshot: its kind, job key, the target's
// columns and key columns.
type KeptSnapshot struct {
	Snapshot int64                  `json:"snapshot"`
	Kind     string                 `json:"kind"`
	JobKey   string                 `json:"job_key"`
	Columns  []catalog.TargetColumn `json:"columns"`
	Key      []string               `json:"key"`
}

// ReadKept reads the kept snapshots of job j in one read transaction.
func ReadKept(ctx context.Context, db *run.DB, j *job.Job) (*KeptSnapshots, error) {
	conn, tx, err := db.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer tx.Rollback()
	snaps, err := catalog.ReadSnapshots(ctx, tx, j.Name, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	ret, err := catalog.ReadRetention(ctx, tx, j.Name)
	if err != nil {
		return nil, err
	}
	k := &KeptSnapshots{Snapshots: []KeptSnapshot{}}
	if k.DatabaseID, _, err = catalog.CommitPoint(ctx, tx); err != nil {
		return nil, err
	}
	for _, r := range snaps {
		if r.Kind == report.KindErase {
			k.LastErasure = r.Snapshot
		}
		if r.Snapshot >= ret.OldestKept {
			k.Snapshots = append(k.Snapshots, KeptSnapshot{Snapshot: r.Snapshot, Kind: r.Kind, JobKey: r.JobKey, Columns: r.Columns, Key: r.KeyColumns})
		}
	}
	return k, nil
}

// CanonicalCSV writes the rows of query, run through q, to the file out
// as the canonical export writes a CSV (CanonicalCSVQuery,
// CSVCopyOptions): in query's order, with the same bytes as idem export
// for the same rows and types.
func CanonicalCSV(ctx context.Context, q catalog.Querier, query, out string) error {
	rows, err := catalog.CanonicalCSVQuery(ctx, q, query)
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, "COPY ("+rows+") TO "+sqltext.SQLString(out)+" "+catalog.CSVCopyOptions); err != nil {
		return catalog.TrimSQLError(err)
	}
	return nil
}

// TrimSQLError is catalog.TrimSQLError, for runner.
func TrimSQLError(err error) error { return catalog.TrimSQLError(err) }

// PublishTemp makes this process's folder for the temporary exports of a
// publisher beside the database at dbPath (job.PublishTempDir), after
// removing the folders of processes that are gone (a publisher killed
// while hashing leaves its plaintext export there). An erasure removes
// them all (removePublishTemps). The caller removes the folder it gets.
func PublishTemp(dbPath string) (string, error) {
	root := job.PublishTempDir(dbPath)
	if err := removeDeadPublishTemps(root); err != nil {
		return "", err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("make the folder of temporary exports: %w", err)
	}
	return os.MkdirTemp(root, strconv.Itoa(os.Getpid())+"-")
}

// removeDeadPublishTemps removes the folders under root whose process
// (the number their name starts with) no longer runs.
func removeDeadPublishTemps(root string) error {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the temporary exports of killed publishers: %w", err)
	}
	for _, e := range entries {
		pidText, _, _ := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(pidText)
		if err == nil && pid != os.Getpid() && run.ProcessAlive(pid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			return fmt.Errorf("remove the temporary export of a killed publisher: %w", err)
		}
	}
	return nil
}
