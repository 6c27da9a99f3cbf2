package catalog

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/report"
)

// idem's own tables are versioned: migrations/NNNN_<name>.sql are the
// steps from one catalog version to the next, and idem.meta's row
// catalog_version names the last one a database took. A database from
// before catalog versions has no such row: it is at version 0, and 0001
// (which creates only what is missing) brings it to 1.

//go:embed migrations/*.sql
var embedded embed.FS

// migrationName is the whole contract of a migration's file name: four
// digits (its version), an underscore, a lower-case name and ".sql".
var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9]+(?:_[a-z0-9]+)*)\.sql$`)

// versionKey is the key of the catalog version's row in idem.meta.
const versionKey = "catalog_version"

// Fault points of a migration (crash tests; see docs/reliability.md): every
// pending migration and the new version are written, before COMMIT; and
// after COMMIT, before the CHECKPOINT that writes them into the file.
const (
	FaultMigrateBeforeCommit = "migrate_before_commit"
	FaultMigrateAfterCommit  = "migrate_after_commit"
)

var (
	// ErrDuplicateVersion marks two migration files of one version.
	ErrDuplicateVersion = errors.New("duplicate migration version")
	// ErrMissingVersion marks a gap in the migrations' versions.
	ErrMissingVersion = errors.New("missing migration version")
)

// Migration is one step of idem's own tables, from catalog version
// Version-1 to Version.
type Migration struct {
	Version int
	File    string // the file's base name, e.g. 0001_initial.sql
	SQL     string
	SHA256  string // of the file's bytes, lower-case hex
}

// VersionError refuses a database written by a newer idem: its catalog
// version is above the last this idem knows. It wraps report.ErrRefused (exit
// 3).
type VersionError struct {
	Path    string
	Version int // the database's
	Latest  int // this idem's
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("database %s has catalog version %d; this idem reads up to %d: upgrade idem", e.Path, e.Version, e.Latest)
}

func (e *VersionError) Unwrap() error { return report.ErrRefused }

// SumError refuses a database that recorded, for a migration it took, a
// sha256 other than that of this idem's embedded file of that version: it
// was migrated by a build whose migration differs (edited after release),
// so its tables may not be what this idem's files make. It wraps
// report.ErrRefused (exit 3).
type SumError struct {
	Path               string
	Version            int
	File               string // this idem's file of Version
	RecordedFile       string // the file name the database recorded
	Recorded, Embedded string // sha256s
}

func (e *SumError) Error() string {
	file := e.File
	if e.RecordedFile != e.File {
		file = e.RecordedFile + " (here " + e.File + ")"
	}
	return fmt.Sprintf("database %s took migration %s (catalog version %d) with sha256 %s, but this idem's file has sha256 %s: "+
		"it was migrated by another build of idem whose migration differs; nothing was changed. Open it with the idem that migrated it",
		e.Path, file, e.Version, e.Recorded, e.Embedded)
}

func (e *SumError) Unwrap() error { return report.ErrRefused }

// ParseMigrations reads the migrations in folder dir of fsys, ordered by
// version. Every file there must be named as migrationName says, and the
// versions must run 1, 2, 3... without a gap or a repeat: a repeat is an
// ErrDuplicateVersion and a gap an ErrMissingVersion, both naming the two
// files concerned.
func ParseMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("migration %s: not a file named NNNN_<name>.sql (four digits, lower-case name)", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		text, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(text)
		ms = append(ms, Migration{Version: v, File: e.Name(), SQL: string(text), SHA256: hex.EncodeToString(sum[:])})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("read migrations: none in %s", dir)
	}
	sort.Slice(ms, func(i, k int) bool {
		if ms[i].Version != ms[k].Version {
			return ms[i].Version < ms[k].Version
		}
		return ms[i].File < ms[k].File
	})
	if ms[0].Version != 1 {
		return nil, fmt.Errorf("%w: the first migration is %s, not version 0001", ErrMissingVersion, ms[0].File)
	}
	for i := 1; i < len(ms); i++ {
		prev, m := ms[i-1], ms[i]
		switch {
		case m.Version == prev.Version:
			return nil, fmt.Errorf("%w: %s and %s are both version %d", ErrDuplicateVersion, prev.File, m.File, m.Version)
		case m.Version != prev.Version+1:
			return nil, fmt.Errorf("%w: %s follows %s: version %04d is missing", ErrMissingVersion, m.File, prev.File, prev.Version+1)
		}
	}
	return ms, nil
}

// Migrations are idem's own migrations, embedded in the binary.
func Migrations() ([]Migration, error) { return ParseMigrations(embedded, "migrations") }

// LatestVersion is the catalog version this idem writes: its last
// migration's.
func LatestVersion() (int, error) {
	ms, err := Migrations()
	if err != nil {
		return 0, err
	}
	return ms[len(ms)-1].Version, nil
}

// Migrate brings idem's own tables in the database at path (db, opened
// writable) to the latest catalog version: every pending migration and the
// new version row in one transaction, then a CHECKPOINT, so that a kill
// leaves the old version or the new one and the next open finishes. A
// database at the latest version is left as it is; one of a newer version
// is refused with a *VersionError before anything is written. fault, when
// not nil, is called at the FaultMigrate points.
func Migrate(ctx context.Context, db *sql.DB, path string, fault func(string)) error {
	ms, err := Migrations()
	if err != nil {
		return err
	}
	return migrateWith(ctx, db, path, ms, freshSchema(ms), fault)
}

func migrate(ctx context.Context, db *sql.DB, path string, ms []Migration, fault func(string)) error {
	return migrateWith(ctx, db, path, ms, "", fault)
}

// migrateWith is migrate; fresh, when not "", is the schema of ms's last
// version, which a database without an idem schema takes instead of
// every migration (see fresh.go).
func migrateWith(ctx context.Context, db *sql.DB, path string, ms []Migration, fresh string, fault func(string)) error {
	latest := ms[len(ms)-1].Version
	v, err := readVersion(ctx, db, path)
	if err != nil {
		return err
	}
	if v > latest {
		return &VersionError{Path: path, Version: v, Latest: latest}
	}
	if err := checkSums(ctx, db, path, ms, v); err != nil || v == latest {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", path, err)
	}
	if err := migrateTx(ctx, tx, path, ms, fresh); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if fault != nil {
		fault(FaultMigrateBeforeCommit)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s to catalog version %d: commit: %w", path, latest, err)
	}
	if fault != nil {
		fault(FaultMigrateAfterCommit)
	}
	// DDL replayed from a WAL has had bugs in DuckDB 1.4-1.5 (and 0002 is
	// written to replay even on a read-only open): write the migration into
	// the file at once.
	if _, err := db.ExecContext(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return nil
}

// migrateTx applies the migrations after the database's version, read
// again in tx, and records the last one's. A database without an idem
// schema takes fresh instead, when it is not "".
func migrateTx(ctx context.Context, tx *sql.Tx, path string, ms []Migration, fresh string) error {
	latest := ms[len(ms)-1].Version
	v, err := readVersion(ctx, tx, path)
	if err != nil {
		return err
	}
	if v > latest {
		return &VersionError{Path: path, Version: v, Latest: latest}
	}
	if err := checkSums(ctx, tx, path, ms, v); err != nil {
		return err
	}
	useFresh := v == 0 && fresh != ""
	if useFresh {
		// An idem schema without a version is a database from before
		// catalog versions: its tables take every migration.
		var schemas int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_schemas() WHERE database_name = current_database() AND schema_name = 'idem'`).Scan(&schemas); err != nil {
			return fmt.Errorf("migrate %s: %w", path, err)
		}
		useFresh = schemas == 0
	}
	if useFresh {
		if _, err := tx.ExecContext(ctx, fresh); err != nil {
			return fmt.Errorf("create idem's tables in %s (catalog version %d): %w", path, latest, TrimSQLError(err))
		}
	} else {
		for _, m := range ms[v:] {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migrate %s to catalog version %d (%s): %w", path, m.Version, m.File, TrimSQLError(err))
			}
		}
	}
	if err := recordSums(ctx, tx, path, ms); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM idem.meta WHERE key = ?`, versionKey); err != nil {
		return fmt.Errorf("record catalog version of %s: %w", path, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO idem.meta (key, value) VALUES (?, ?)`, versionKey, strconv.Itoa(latest)); err != nil {
		return fmt.Errorf("record catalog version of %s: %w", path, err)
	}
	return nil
}

// CheckVersion refuses, with a *VersionError, a database whose catalog
// version is newer than this idem's. It only reads: a read-only open of an
// older database reads it as it is.
func CheckVersion(ctx context.Context, q Querier, path string) error {
	latest, err := LatestVersion()
	if err != nil {
		return err
	}
	v, err := readVersion(ctx, q, path)
	if err != nil {
		return err
	}
	if v > latest {
		return &VersionError{Path: path, Version: v, Latest: latest}
	}
	ms, err := Migrations()
	if err != nil {
		return err
	}
	return checkSums(ctx, q, path, ms, v)
}

// sumsVersion is the catalog version from which idem.migrations records
// the migrations a database took (0008 creates it).
const sumsVersion = 8

// recordSums records every migration of ms that idem.migrations does not
// hold yet with its file's sha256, in the migrating transaction: those it
// applied, and for a database migrated before the table existed, those it
// had taken (the embedded files are the record of what they were).
func recordSums(ctx context.Context, tx *sql.Tx, path string, ms []Migration) error {
	if ms[len(ms)-1].Version < sumsVersion {
		return nil
	}
	// One statement for all of them: each statement costs DuckDB a parse
	// and a plan, which a new database paid nine times.
	var values []string
	var args []any
	for _, m := range ms {
		values = append(values, "(CAST(? AS INTEGER), CAST(? AS VARCHAR), CAST(? AS VARCHAR))")
		args = append(args, m.Version, m.File, m.SHA256)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO idem.migrations (version, file, sha256, applied_at)
		SELECT v.version, v.file, v.sha256, current_timestamp FROM (VALUES `+strings.Join(values, ", ")+`) AS v (version, file, sha256)
		WHERE v.version NOT IN (SELECT version FROM idem.migrations) ORDER BY v.version`, args...); err != nil {
		return fmt.Errorf("record the migrations of %s: %w", path, TrimSQLError(err))
	}
	return nil
}

// checkSums refuses, with a *SumError, a database that recorded a sha256
// for one of ms other than its file's. A database at catalog version v
// below sumsVersion recorded none; a version above ms's is left to
// VersionError.
func checkSums(ctx context.Context, q Querier, path string, ms []Migration, v int) error {
	if v < sumsVersion {
		return nil
	}
	rows, err := q.QueryContext(ctx, `SELECT version, file, sha256 FROM idem.migrations ORDER BY version`)
	if err != nil {
		return fmt.Errorf("read the migrations of %s: %w", path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		var file, sum string
		if err := rows.Scan(&v, &file, &sum); err != nil {
			return fmt.Errorf("read the migrations of %s: %w", path, err)
		}
		if v < 1 || v > len(ms) {
			continue
		}
		if m := ms[v-1]; sum != m.SHA256 {
			return &SumError{Path: path, Version: v, File: m.File, RecordedFile: file, Recorded: sum, Embedded: m.SHA256}
		}
	}
	return rows.Err()
}

// Version is the catalog version of the database q reads: 0 for
// one without idem.meta or without a catalog_version row (a new database,
// or one from before catalog versions).
func Version(ctx context.Context, q Querier) (int, error) { return readVersion(ctx, q, "") }

func readVersion(ctx context.Context, q Querier, path string) (int, error) {
	where := ""
	if path != "" {
		where = " of " + path
	}
	// Outside a transaction the version is read at once, and only a
	// failed read looks the table up: a database's first duckdb_tables()
	// builds DuckDB's built-in views (16-40 ms, on every open), and a
	// failed statement outside a transaction spoils nothing. In a
	// transaction the table is looked up first.
	_, direct := q.(*sql.DB)
	if !direct {
		exists, err := TableExists(ctx, q, "idem", "meta")
		if err != nil || !exists {
			return 0, err
		}
	}
	rows, err := q.QueryContext(ctx, `SELECT value FROM idem.meta WHERE key = ?`, versionKey)
	if err != nil {
		if direct {
			if exists, terr := TableExists(ctx, q, "idem", "meta"); terr == nil && !exists {
				return 0, nil
			}
		}
		return 0, fmt.Errorf("read catalog version%s: %w", where, err)
	}
	defer rows.Close()
	var values []string
	for rows.Next() {
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			return 0, fmt.Errorf("read catalog version%s: %w", where, err)
		}
		values = append(values, strconv.Quote(s.String))
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read catalog version%s: %w", where, err)
	}
	switch len(values) {
	case 0:
		return 0, nil
	case 1:
		v, err := strconv.Atoi(strings.Trim(values[0], `"`))
		if err == nil && v >= 0 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("read catalog version%s: idem.meta holds %s rows [%s], want one whole number", where, versionKey, strings.Join(values, ", "))
}
