package catalog

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkCommitBookkeeping times one commit's bookkeeping rows with
// their COMMIT, on a database file, CHECKPOINT after every tenth commit as
// a project run's handle would: catalog version 7's four tables (idem.runs,
// idem.commits, idem.snapshots, idem.packets) against the commit log's two
// (idem.runs with the commit's sequence number, idem.snapshots with the
// packet). The state row (idem.jobs) is updated in both.
//
//	go test ./internal/catalog -run '^$' -bench CommitBookkeeping -count 5
func BenchmarkCommitBookkeeping(b *testing.B) {
	packet := `{"job":"a","entries":[{"partition":null,"whole_target":true,"rows":1000,"bounds":{"id":["1","1000"]}}]}`
	open := func(b *testing.B) *sql.DB {
		db, err := sql.Open("duckdb", filepath.Join(b.TempDir(), "b.duckdb")+"?threads=1")
		require.NoError(b, err)
		b.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(1)
		return db
	}
	run := func(b *testing.B, db *sql.DB, commit func(tx *sql.Tx, s int64) error) {
		ctx := context.Background()
		_, err := db.ExecContext(ctx, `INSERT INTO idem.jobs (job, snapshot) VALUES ('a', 0)`)
		require.NoError(b, err)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(b, err)
			s := int64(i + 1)
			require.NoError(b, commit(tx, s))
			_, err = tx.ExecContext(ctx, `UPDATE idem.jobs SET snapshot = ?, job_key = 'k', updated_at = current_timestamp WHERE job = 'a'`, s)
			require.NoError(b, err)
			require.NoError(b, tx.Commit())
			if s%10 == 0 {
				_, err = db.ExecContext(ctx, "CHECKPOINT")
				require.NoError(b, err)
			}
		}
	}
	snapshot := NewSnapshot{Job: "a", Kind: "loaded", JobKey: "k", Parts: `{"input":"i"}`, Inputs: `{"files":[]}`,
		RowsIn: 1000, RowsOut: 1000, Outcomes: `{"accepted":1000}`, Columns: `[{"name":"id","type":"INTEGER"}]`, KeyColumns: `["id"]`}
	b.Run("version7_four_tables", func(b *testing.B) {
		db := open(b)
		ms, err := Migrations()
		require.NoError(b, err)
		require.NoError(b, migrate(context.Background(), db, "b", ms[:7], nil))
		run(b, db, func(tx *sql.Tx, s int64) error {
			ctx := context.Background()
			if _, err := tx.ExecContext(ctx, `INSERT INTO idem.snapshots (job, snapshot, parent, kind, batch_id, job_key, parts, inputs, rows_in, rows_out, outcomes, columns, key_columns, committed_at)
				VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)`, "a", s, s-1, snapshot.Kind, snapshot.JobKey, snapshot.Parts, snapshot.Inputs,
				snapshot.RowsIn, snapshot.RowsOut, snapshot.Outcomes, snapshot.Columns, snapshot.KeyColumns); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO idem.packets (job, snapshot, packet, recorded_at) VALUES ('a', ?, ?, current_timestamp)`, s, packet); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO idem.runs (job, run_at, batch_id, decision, changed, rows_in, outcomes, snapshot, cursor, epoch, message)
				VALUES ('a', current_timestamp, NULL, 'loaded', '[]', 1000, '{"accepted":1000}', ?, 0, 1, NULL)`, s); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO idem.commits (db_id, seq, job, kind, committed_at)
				SELECT db_id, (SELECT max(seq) FROM idem.commits) + 1, 'a', 'loaded', current_timestamp FROM idem.commits WHERE seq = 0`)
			return err
		})
	})
	b.Run("commit_log_two_tables", func(b *testing.B) {
		db := open(b)
		require.NoError(b, Migrate(context.Background(), db, "b", nil))
		run(b, db, func(tx *sql.Tx, s int64) error {
			ctx := context.Background()
			sn := snapshot
			sn.Snapshot, sn.Parent, sn.Packet = s, s-1, packet
			if err := InsertSnapshot(ctx, tx, sn); err != nil {
				return err
			}
			return InsertRun(ctx, tx, RunRow{Job: "a", Decision: "loaded", Changed: "[]", RowsIn: 1000, Outcomes: `{"accepted":1000}`,
				Snapshot: s, Cursor: 0, Epoch: 1, Commit: true})
		})
	})
}
