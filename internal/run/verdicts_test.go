package run

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/stretchr/testify/require"
)

// TestVerdictsKeptAcrossProcesses: a committed run's guard verdicts are
// written to idem.verdicts and a new handle trusts them; a row is trusted
// only for the exact content and engine its key names and only with the
// MAC of the secret beside the database, so a forged, changed, foreign or
// other-engine row never lets SQL the seal refuses through.
func TestVerdictsKeptAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "idem.duckdb")
	d := openTestDB(t, dir)
	j := writeJob(t, dir, mbkJob(false))
	in := filepath.Join(dir, "b1.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(`{"k":1,"o":1,"v":"a","n":1}`+"\n"), 0o644))
	_, err := d.Run(ctx, j, RunOptions{Input: in})
	require.NoError(t, err)
	kinds := func(d *DB) []string {
		rows, err := d.SQL().QueryContext(ctx, `SELECT DISTINCT kind FROM idem.verdicts ORDER BY 1`)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var k string
			require.NoError(t, rows.Scan(&k))
			out = append(out, k)
		}
		return out
	}
	require.Equal(t, []string{"explain", "owners", "released", "seal"}, kinds(d), "written with the commit")
	var stored int
	require.NoError(t, d.SQL().QueryRowContext(ctx, `SELECT count(*) FROM idem.verdicts`).Scan(&stored))
	loaded := func() *guardCache {
		c := newGuardCache()
		require.NoError(t, c.load(ctx, d.SQL(), verdictSecret(path, false)))
		return c
	}
	secret := verdictSecret(path, false)
	require.Len(t, secret, 32, "made by the first commit")
	require.Len(t, loaded().m, stored, "a new handle trusts every row")
	require.NoError(t, d.Close())
	d, err = Open(ctx, path, OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	require.Len(t, loaded().m, stored, "the secret is read again")
	_, err = d.Run(ctx, j, RunOptions{Input: in})
	require.NoError(t, err)
	var again int
	require.NoError(t, d.SQL().QueryRowContext(ctx, `SELECT count(*) FROM idem.verdicts`).Scan(&again))
	require.Equal(t, stored, again, "a verdict found is not written again")

	// A job whose SQL the seal refuses, and rows claiming it passed.
	bad := &job.Job{Name: "m", Table: "m", Pipeline: &pipeline.Pipeline{Name: "custom"},
		Steps: []pipeline.Step{{Name: "01_model.sql", SQL: "CREATE OR REPLACE TEMP TABLE idem_x AS SELECT * FROM read_csv('/etc/passwd');\n"}}}
	k, err := sealKey(bad.Seal(), bad.SealedTexts())
	require.NoError(t, err)
	signed := func(id string, k [32]byte, value string, secret []byte) string {
		s := verdictStore{secret: secret, dbID: loaded().store.dbID}
		if id != "" {
			s.dbID = id
		}
		return s.mac(k, verdictRow{"seal", value})
	}
	other := make([]byte, 32)
	for _, tc := range []struct {
		name, key, value, mac string
		trusted               bool
	}{
		{"signed with this database's secret", hex.EncodeToString(k[:]), "[]", signed("", k, "[]", secret), true},
		{"no MAC", hex.EncodeToString(k[:]), "[]", "", false},
		{"another secret", hex.EncodeToString(k[:]), "[]", signed("", k, "[]", other), false},
		{"another database", hex.EncodeToString(k[:]), "[]", signed("0123", k, "[]", secret), false},
		{"value changed after signing", hex.EncodeToString(k[:]), "[]", signed("", k, `[{"Name":"x"}]`, secret), false},
	} {
		_, err := d.SQL().ExecContext(ctx, `DELETE FROM idem.verdicts WHERE kind = 'seal' AND value = '[]' AND key = ?`, hex.EncodeToString(k[:]))
		require.NoError(t, err)
		_, err = d.SQL().ExecContext(ctx, `INSERT INTO idem.verdicts VALUES (?, 'seal', ?, ?)`, tc.key, tc.value, tc.mac)
		require.NoError(t, err)
		vs, err := sealViolations(ctx, d.SQL(), bad, loaded())
		require.NoError(t, err)
		if tc.trusted {
			require.Empty(t, vs, "%s: the control: a row signed right is trusted", tc.name)
		} else {
			require.NotEmpty(t, vs, tc.name)
			require.Equal(t, "read_csv()", vs[0].Construct, tc.name)
		}
	}

	// A row signed right for another engine's key is never found.
	_, err = d.SQL().ExecContext(ctx, `DELETE FROM idem.verdicts WHERE key = ?`, hex.EncodeToString(k[:]))
	require.NoError(t, err)
	desc, err := sealDesc(bad.Seal(), bad.SealedTexts())
	require.NoError(t, err)
	otherEngine := guardKeyOf("v0.0.1", "seal", desc)
	_, err = d.SQL().ExecContext(ctx, `INSERT INTO idem.verdicts VALUES (?, 'seal', '[]', ?)`, hex.EncodeToString(otherEngine[:]), signed("", otherEngine, "[]", secret))
	require.NoError(t, err)
	vs, err := sealViolations(ctx, d.SQL(), bad, loaded())
	require.NoError(t, err)
	require.NotEmpty(t, vs, "another engine's verdict")

	// A copy of the database without its key file trusts no row.
	require.NoError(t, os.Remove(verdictKeyFile(path)))
	require.Nil(t, verdictSecret(path, false))
	fresh := verdictSecret(path, true)
	require.Len(t, fresh, 32)
	c := newGuardCache()
	require.NoError(t, c.load(ctx, d.SQL(), fresh))
	require.Empty(t, c.m, "rows signed under the lost secret")
}
