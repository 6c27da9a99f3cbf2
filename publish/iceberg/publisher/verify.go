package publisher

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go/table"
	_ "github.com/duckdb/duckdb-go/v2" // database/sql driver "duckdb" for reading back
	"github.com/idem-dev/idem/runner"
)

// Verified is one idem snapshot whose Iceberg snapshot read back equal.
type Verified struct {
	Snapshot        int64  `json:"snapshot"`
	IcebergSnapshot int64  `json:"iceberg_snapshot"`
	Rows            int64  `json:"rows"`
	SHA256          string `json:"sha256"`
}

// VerifyReport reports a verification.
type VerifyReport struct {
	Job      string     `json:"job"`
	Table    string     `json:"table"`
	Verified []Verified `json:"verified"`
}

// Verify loads job j's table from a fresh catalog handle and reads every
// kept idem snapshot's Iceberg snapshot by its id (through iceberg-go's
// scan, as any Iceberg reader would), and compares its rows with `idem
// export --snapshot S`: the sha256 of the same canonical CSV. The first
// difference (a snapshot not published, one published that idem no longer
// keeps, rows that differ, with the first differing line) is an error
// (exit 1); the snapshots verified before it are in the report.
func Verify(ctx context.Context, db *runner.Reader, j *runner.JobInfo) (*VerifyReport, error) {
	if j.Iceberg == nil {
		return nil, runner.Usage("%s declares no [publish.iceberg]", j.Name)
	}
	rep := &VerifyReport{Job: j.Name, Table: strings.Join(Ident(j), "."), Verified: []Verified{}}
	cat, err := OpenCatalog(ctx, j.Iceberg)
	if err != nil {
		return rep, err
	}
	defer cat.Close()
	tbl, err := cat.loadTable(ctx, j)
	if err != nil {
		return rep, err
	}
	idem, err := readIdem(ctx, db)
	if err != nil {
		return rep, err
	}
	if tbl == nil {
		if len(idem.kept) == 0 {
			return rep, nil
		}
		return rep, fmt.Errorf("verify %s: Iceberg table %s does not exist: snapshot %d is not published", j.Name, rep.Table, idem.kept[0].Snapshot)
	}
	pub, err := readPublished(tbl)
	if err != nil {
		return rep, err
	}
	count := map[int64]int{}
	for _, s := range pub.idemOf {
		count[s]++
	}
	for s, n := range count {
		if n > 1 {
			return rep, fmt.Errorf("verify %s: idem snapshot %d is published %d times in %s", j.Name, s, n, rep.Table)
		}
	}
	kept := map[int64]bool{}
	for _, s := range idem.kept {
		kept[s.Snapshot] = true
		if id, ok := pub.byIdem[s.Snapshot]; ok {
			if err := checkProps(pub.props[id], idem.dbID, s, ""); err != nil {
				return rep, fmt.Errorf("verify %s: Iceberg snapshot %d (idem snapshot %d): %w", j.Name, id, s.Snapshot, err)
			}
		}
	}
	latest := idem.kept[len(idem.kept)-1].Snapshot
	for id, s := range pub.idemOf {
		if !kept[s] && s > latest {
			return rep, fmt.Errorf("verify %s: Iceberg snapshot %d holds idem snapshot %d, which this database does not have (it ends at snapshot %d): published from another history (run publish --republish)", j.Name, id, s, latest)
		}
		if !kept[s] && pub.byIdem[s] == id {
			return rep, fmt.Errorf("verify %s: Iceberg snapshot %d holds idem snapshot %d, which idem no longer keeps (expired or rebuilt after an erasure): run publish to expire it", j.Name, id, s)
		}
	}
	dir, err := db.TempDir()
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)
	duck, err := sql.Open("duckdb", "")
	if err != nil {
		return rep, err
	}
	defer duck.Close()
	for _, s := range idem.kept {
		id, ok := pub.byIdem[s.Snapshot]
		if !ok {
			return rep, fmt.Errorf("verify %s: idem snapshot %d is not published in %s (run publish to catch up)", j.Name, s.Snapshot, rep.Table)
		}
		want, err := db.Export(ctx, runner.ExportOptions{Snapshot: s.Snapshot, Out: filepath.Join(dir, fmt.Sprintf("want-%d.csv", s.Snapshot)), Format: "csv"})
		if err != nil {
			return rep, fmt.Errorf("verify %s: export snapshot %d: %w", j.Name, s.Snapshot, err)
		}
		if err := checkProps(pub.props[id], idem.dbID, s, want.SHA256); err != nil {
			return rep, fmt.Errorf("verify %s: Iceberg snapshot %d (idem snapshot %d): %w", j.Name, id, s.Snapshot, err)
		}
		got, err := readBack(ctx, duck, tbl, id, s, dir)
		if err != nil {
			return rep, fmt.Errorf("verify %s: read Iceberg snapshot %d (idem snapshot %d): %w", j.Name, id, s.Snapshot, err)
		}
		sum, err := fileSHA(got)
		if err != nil {
			return rep, err
		}
		if sum != want.SHA256 {
			return rep, fmt.Errorf("verify %s: idem snapshot %d differs from Iceberg snapshot %d: sha256 %s (idem export) != %s (Iceberg read back); %s",
				j.Name, s.Snapshot, id, want.SHA256, sum, firstDifference(want.Path, got))
		}
		rep.Verified = append(rep.Verified, Verified{Snapshot: s.Snapshot, IcebergSnapshot: id, Rows: want.Rows, SHA256: sum})
	}
	return rep, nil
}

// checkProps compares the summary properties of a published snapshot
// with idem snapshot s of database dbID, whose export has sha256 sum (""
// when not known yet: not compared). A snapshot published before idem
// recorded the database id has none.
func checkProps(props map[string]string, dbID string, s *runner.KeptSnapshot, sum string) error {
	for _, c := range []struct{ key, want string }{{PropSHA256, sum}, {PropJobKey, s.JobKey}, {PropDatabase, dbID}} {
		got, ok := props[c.key]
		if (c.key == PropDatabase && !ok) || c.want == "" {
			continue
		}
		if got != c.want {
			return fmt.Errorf("summary property %s is %q, idem's is %q (published from another history: run publish --republish)", c.key, got, c.want)
		}
	}
	return nil
}

// readBack scans Iceberg snapshot id of tbl, projected on the columns of
// idem snapshot s, and writes its rows as idem export writes them (CSV,
// key order, the idem types). It returns the CSV's path.
func readBack(ctx context.Context, duck *sql.DB, tbl *table.Table, id int64, s *runner.KeptSnapshot, dir string) (string, error) {
	names := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		names[i] = c.Name
	}
	scan := tbl.Scan(table.WithSnapshotID(id), table.WithSelectedFields(names...))
	at, err := scan.ToArrowTable(ctx)
	if err != nil {
		return "", err
	}
	defer at.Release()
	pq := filepath.Join(dir, fmt.Sprintf("got-%d.parquet", s.Snapshot))
	f, err := os.Create(pq)
	if err != nil {
		return "", err
	}
	// WriteTable closes f.
	if err := pqarrow.WriteTable(at, f, 1<<20, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps()); err != nil {
		return "", err
	}
	sel := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		sel[i] = columnOf(c).readSQL()
	}
	key := s.Key
	if len(key) == 0 {
		key = names
	}
	order := make([]string, len(key))
	for i, k := range key {
		order[i] = runner.QuoteIdent(k)
	}
	out := filepath.Join(dir, fmt.Sprintf("got-%d.csv", s.Snapshot))
	query := "SELECT " + strings.Join(sel, ", ") + " FROM read_parquet(" + runner.QuoteString(pq) + ") ORDER BY " + strings.Join(order, ", ")
	if err := runner.CanonicalCSV(ctx, duck, query, out); err != nil {
		return "", err
	}
	return out, nil
}

func fileSHA(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// firstDifference names the first line where two CSV files differ.
func firstDifference(want, got string) string {
	a, err1 := os.Open(want)
	b, err2 := os.Open(got)
	if err1 != nil || err2 != nil {
		return "the files could not be compared"
	}
	defer a.Close()
	defer b.Close()
	sa, sb := bufio.NewScanner(a), bufio.NewScanner(b)
	for line := 1; ; line++ {
		okA, okB := sa.Scan(), sb.Scan()
		switch {
		case !okA && !okB:
			return "the lines are equal (line endings differ)"
		case !okA:
			return fmt.Sprintf("line %d: Iceberg has an extra row %q", line, clip(sb.Text()))
		case !okB:
			return fmt.Sprintf("line %d: Iceberg lacks the row %q", line, clip(sa.Text()))
		case sa.Text() != sb.Text():
			return fmt.Sprintf("line %d: idem %q, Iceberg %q", line, clip(sa.Text()), clip(sb.Text()))
		}
	}
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
