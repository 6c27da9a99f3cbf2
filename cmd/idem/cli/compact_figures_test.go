package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

// TestCompactFigures logs the figures of compact and backup; it runs only
// with IDEM_COMPACT_FIGURES=<MB>:
//
//	IDEM_COMPACT_FIGURES=1000 go test ./cmd/idem/cli -run TestCompactFigures -v -timeout 60m
//
// Part 1: a versioned_changes job with history (6 batches of 20,000
// changes on 20,000 entities), then expiry simulated by hand (closed
// history rows and the outcomes of all but the last batch deleted) and
// 10 subjects erased: the file's size at each step and after compact.
// Part 2: the same database grown to about <MB> megabytes with a plain
// table of random rows, half of them then deleted: compact and backup
// time and sizes.
func TestCompactFigures(t *testing.T) {
	mbText := os.Getenv("IDEM_COMPACT_FIGURES")
	if mbText == "" {
		t.Skip("set IDEM_COMPACT_FIGURES=<MB> to measure compact and backup")
	}
	mb, err := strconv.Atoi(mbText)
	require.NoError(t, err)
	j := clitest.NewGuardJob(t)
	size := func() int64 {
		st, err := os.Stat(j.DB)
		require.NoError(t, err)
		return st.Size()
	}
	start := time.Now()
	for b := range 6 {
		var lines []string
		for i := range 20000 {
			lines = append(lines, fmt.Sprintf(`{"change_id":"b%d-%d","entity_id":"e-%05d","source_version":%d,"operation":"upsert","value":"value %d of batch %d %s"}`, b, i, i, b+1, i*(b+3), b, strings.Repeat("v", 10+b)))
		}
		j.Apply("--input", j.Input(fmt.Sprintf("b%d.jsonl", b), lines...))
	}
	t.Logf("6 batches of 20,000 changes applied in %.1fs: %s bytes", time.Since(start).Seconds(), report.Thousands(size()))
	db := clitest.RawDB(t, j.DB)
	for _, s := range []string{
		`DELETE FROM idem."customer_state__history" WHERE idem_to IS NOT NULL`,
		`DELETE FROM customer_state_outcomes WHERE batch_id <> (SELECT batch_id FROM idem.ledger ORDER BY snapshot DESC LIMIT 1)`,
		`CHECKPOINT`,
	} {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
	require.NoError(t, db.Close())
	t.Logf("after deleting the closed history rows and old outcomes (expiry by hand): %s bytes", report.Thousands(size()))
	for i := range 10 {
		r := clitest.CallIdem(t, "erase", j.File, "--key", fmt.Sprintf("e-%05d", i*7))
		require.Equal(t, 0, r.Code, r.Stderr)
	}
	t.Logf("after erasing 10 subjects: %s bytes", report.Thousands(size()))
	res := clitest.CompactOK(t, j.DB)
	t.Logf("compact: %s -> %s bytes in %.2fs", report.Thousands(res.BytesBefore), report.Thousands(res.BytesAfter), res.Seconds)

	// Part 2: about mb megabytes.
	db = clitest.RawDB(t, j.DB)
	rows := mb * 1000 * 1000 / 40
	start = time.Now()
	_, err = db.Exec(fmt.Sprintf(`CREATE TABLE bulk AS SELECT i, md5(i::VARCHAR) AS s, (random() * 1e9)::BIGINT AS r FROM range(%d) t(i); CHECKPOINT`, rows))
	require.NoError(t, err)
	t.Logf("bulk table of %s rows written in %.1fs: %s bytes", report.Thousands(int64(rows)), time.Since(start).Seconds(), report.Thousands(size()))
	r := clitest.CallIdem(t, "backup", "--db", j.DB, "--out", filepath.Join(t.TempDir(), "b0"), "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	t.Logf("backup of the full database: %s", r.Stdout)
	_, err = db.Exec(`DELETE FROM bulk WHERE i % 2 = 0; CHECKPOINT`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	t.Logf("after deleting half of the bulk rows: %s bytes", report.Thousands(size()))
	res = clitest.CompactOK(t, j.DB)
	t.Logf("compact: %s -> %s bytes in %.2fs", report.Thousands(res.BytesBefore), report.Thousands(res.BytesAfter), res.Seconds)
	r = clitest.CallIdem(t, "backup", "--db", j.DB, "--out", filepath.Join(t.TempDir(), "b1"), "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	t.Logf("backup of the compacted database: %s", r.Stdout)
}
