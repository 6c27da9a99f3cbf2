package run

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
)

// The erasure journal is a file beside the database, <db>.erasures: one
// JSON line per erasure the database committed, holding no payload (a
// salted sha256 of the erased value). It lives outside the database so
// that a database file restored from before an erasure cannot bring the
// subject back unnoticed: every open compares the journal with the
// database's idem.erasures and refuses (exit 3) a database that lacks an
// erasure its journal records, until `idem erase --replay-journal` applies
// it again. A backup does not copy the journal, and a restore (which
// copies the database file and its inputs back) leaves it in place.

// JournalPath is the erasure journal of the database at path.
func JournalPath(path string) string { return path + ".erasures" }

// JournalEntry is one erasure of the journal.
type JournalEntry struct {
	DatabaseID string `json:"database_id"`
	Job        string `json:"job"`
	// Subject are the columns of an erasure by subject; empty for an
	// erasure of a value of the pipeline's key.
	Subject  []string `json:"subject_columns,omitempty"`
	Salt     string   `json:"salt"`
	SHA256   string   `json:"sha256"`
	Snapshot int64    `json:"snapshot"`
	ErasedAt string   `json:"erased_at"`
}

// JournalMarker is the key a database before catalog version 6 recorded
// for a journal entry replayed over it while it held nothing of it (since
// then idem.erasures records the entry's salt and hash).
func JournalMarker(e JournalEntry) string { return "#journal:" + e.SHA256 }

// HashValue is the journal's hash of value with salt.
func HashValue(salt, value string) string {
	sum := sha256.Sum256([]byte(salt + value))
	return hex.EncodeToString(sum[:])
}

// Matches says whether e records the erasure of value by e's columns.
func (e JournalEntry) Matches(value string) bool {
	return value == JournalMarker(e) || HashValue(e.Salt, value) == e.SHA256
}

// id is what identifies e among the journal's entries of its database.
func (e JournalEntry) id() string {
	return e.Job + "\x00" + strings.Join(e.Subject, "\x00") + "\x00" + e.SHA256
}

// When is e's time as written, for messages.
func (e JournalEntry) When() string { return e.ErasedAt }

// readJournal reads the journal at path; a missing file is an empty
// journal, and a last line cut short by a kill is left out (it is written
// again from the database by the next writable open).
func readJournal(path string) ([]JournalEntry, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the erasure journal: %w", err)
	}
	var out []JournalEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		t := bytes.TrimSpace(sc.Bytes())
		if len(t) == 0 {
			continue
		}
		var e JournalEntry
		if err := json.Unmarshal(t, &e); err != nil || e.Job == "" || e.SHA256 == "" {
			if !bytes.HasSuffix(data, []byte("\n")) && line == bytes.Count(data, []byte("\n"))+1 {
				break // the torn last line of a killed append
			}
			return nil, fmt.Errorf("erasure journal %s:%d: not an erasure entry; it is written by idem only", path, line)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// appendJournal adds entries to the journal at path and syncs it (and its
// folder when it is new).
func appendJournal(path string, entries []JournalEntry) error {
	if len(entries) == 0 {
		return nil
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("write the erasure journal: %w", err)
	}
	var b bytes.Buffer
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		// A torn last line (a kill mid-append) ends here.
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			b.WriteByte('\n')
		}
	}
	for _, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			f.Close()
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("write the erasure journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync the erasure journal: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if dir, err := os.Open(filepath.Dir(path)); err == nil {
			_ = dir.Sync()
			dir.Close()
		}
	}
	return nil
}

// erasureRow is one row of idem.erasures: key is the value's hash with
// salt, or, in a database of a catalog before 6 read as it is (salt ""),
// the value.
type erasureRow struct {
	job, key, salt, erasedAt string
	subject                  []string
	snapshot                 int64
}

// readErasureRows reads idem.erasures. A database from before catalog
// version 6 (3) opened read-only (not migrated) has no salt (nor
// subject_columns): its keys are the values (its erasures all of keys).
// q is a *sql.DB, so a failed statement costs nothing but the error.
func readErasureRows(ctx context.Context, q *sql.DB) ([]erasureRow, error) {
	const sel = `SELECT job, key, %s, coalesce(snapshot, 0), coalesce(strftime(erased_at, '%%Y-%%m-%%dT%%H:%%M:%%SZ'), '') FROM idem.erasures ORDER BY job, snapshot, key`
	var rows *sql.Rows
	var err error
	for _, cols := range []string{"subject_columns, salt", "subject_columns, CAST(NULL AS VARCHAR)", "CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR)"} {
		if rows, err = q.QueryContext(ctx, fmt.Sprintf(sel, cols)); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read idem.erasures: %w", catalog.TrimSQLError(err))
	}
	defer rows.Close()
	var out []erasureRow
	for rows.Next() {
		var r erasureRow
		var cols, salt sql.NullString
		if err := rows.Scan(&r.job, &r.key, &cols, &salt, &r.snapshot, &r.erasedAt); err != nil {
			return nil, err
		}
		r.salt = salt.String
		if cols.Valid {
			if err := json.Unmarshal([]byte(cols.String), &r.subject); err != nil {
				return nil, fmt.Errorf("idem.erasures: subject columns %q: %w", cols.String, err)
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// entry is the journal entry of row r in the database of id dbID: its
// hash and salt as recorded, or the value hashed with dbID.
func (r erasureRow) entry(dbID string) JournalEntry {
	e := JournalEntry{DatabaseID: dbID, Job: r.job, Subject: r.subject, Snapshot: r.snapshot, Salt: dbID, ErasedAt: r.erasedAt}
	switch h, marker := strings.CutPrefix(r.key, "#journal:"); {
	case r.salt != "":
		e.Salt, e.SHA256 = r.salt, r.key
	case marker:
		e.SHA256 = h
	default:
		e.SHA256 = HashValue(dbID, r.key)
	}
	return e
}

// journalState reads the journal and the erasures of the database: the
// journal's entries of this database, and the entries of its erasure rows
// by id.
func (d *DB) journalState(ctx context.Context) ([]JournalEntry, map[string]JournalEntry, error) {
	entries, err := readJournal(JournalPath(d.path))
	if err != nil {
		return nil, nil, err
	}
	rows, err := readErasureRows(ctx, d.sql)
	if err != nil && len(entries) == 0 {
		return nil, nil, nil // a database before erasures: nothing to check
	}
	if err != nil || len(rows) == 0 && len(entries) == 0 {
		return nil, nil, err
	}
	id, _, err := catalog.CommitPoint(ctx, d.sql)
	if err != nil {
		return nil, nil, err
	}
	mine := entries[:0]
	for _, e := range entries {
		if e.DatabaseID == id {
			mine = append(mine, e) // another database's once at this path are not its
		}
	}
	have := map[string]JournalEntry{}
	for _, r := range rows {
		e := r.entry(id)
		have[e.id()] = e
	}
	return mine, have, nil
}

// JournalGap lists the journal's entries of this database that its
// idem.erasures lacks.
func (d *DB) JournalGap(ctx context.Context) ([]JournalEntry, error) {
	if _, err := os.Stat(JournalPath(d.path)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	entries, have, err := d.journalState(ctx)
	if err != nil {
		return nil, err
	}
	return lacking(entries, have), nil
}

// lacking are the journal's entries that have (the database's erasures)
// lacks.
func lacking(entries []JournalEntry, have map[string]JournalEntry) []JournalEntry {
	var missing []JournalEntry
	for _, e := range entries {
		if _, ok := have[e.id()]; !ok {
			missing = append(missing, e)
		}
	}
	return missing
}

// checkJournal refuses (JournalGapError) a database that lacks an erasure
// its journal records; a writable open first adds to the journal the
// erasures it lacks (a kill between an erasure's COMMIT and its journal
// line).
func (d *DB) checkJournal(ctx context.Context) error {
	entries, have, err := d.journalState(ctx)
	if err != nil || len(have) == 0 && len(entries) == 0 {
		return err
	}
	if !d.readOnly {
		if err := d.appendMissing(entries, have); err != nil {
			return err
		}
	}
	if missing := lacking(entries, have); len(missing) > 0 {
		return &JournalGapError{Path: d.path, Missing: missing}
	}
	return nil
}

// SyncJournal adds to the journal every erasure of idem.erasures it does
// not record yet, synced before it returns. An erasure calls it after its
// COMMIT; every writable open calls it too.
func (d *DB) SyncJournal(ctx context.Context) error {
	entries, have, err := d.journalState(ctx)
	if err != nil || len(have) == 0 {
		return err
	}
	return d.appendMissing(entries, have)
}

// appendMissing appends to the journal the entries of have (the
// database's erasures) that entries (the journal's) lack.
func (d *DB) appendMissing(entries []JournalEntry, have map[string]JournalEntry) error {
	known := map[string]bool{}
	for _, e := range entries {
		known[e.id()] = true
	}
	var add []JournalEntry
	for _, id := range slices.Sorted(maps.Keys(have)) {
		if !known[id] {
			add = append(add, have[id])
		}
	}
	return appendJournal(JournalPath(d.path), add)
}

// JournalGapError refuses a database that lacks erasures its journal
// records (exit 3).
type JournalGapError struct {
	Path    string
	Missing []JournalEntry
}

func (e *JournalGapError) Error() string {
	var b strings.Builder
	for i, m := range e.Missing {
		if i == 3 {
			fmt.Fprintf(&b, ", and %d more", len(e.Missing)-3)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		what := "a key"
		if len(m.Subject) > 0 {
			what = "a subject (" + strings.Join(m.Subject, ", ") + ")"
		}
		fmt.Fprintf(&b, "%s of job %s erased at %s", what, m.Job, m.When())
	}
	return fmt.Sprintf("database %s lacks %d erasure(s) its erasure journal %s records (%s): it was restored from a copy taken before them, and would serve erased subjects again. Apply them again with `idem erase --replay-journal JOB_OR_PROJECT_DIR --db %s`; until then nothing else opens it",
		e.Path, len(e.Missing), JournalPath(e.Path), b.String(), e.Path)
}

func (e *JournalGapError) Unwrap() error { return report.ErrRefused }
