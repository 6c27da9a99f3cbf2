package inspect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// ErrNotReadOnly is a query text that is not one read-only statement.
var ErrNotReadOnly = errors.New("idem query runs one read-only statement")

// Query runs one read-only statement against the database at path and
// returns its values as the driver scans them (int64, time.Time,
// duckdb.Decimal...). See QueryTextReader for what may run.
func Query(ctx context.Context, path, query string, opts run.OpenOptions) (*run.Rows, error) {
	return runQuery(ctx, path, query, opts, false, nil)
}

// QueryTextReader runs one read-only statement against the database at
// path and returns every value as the text DuckDB's own CLI prints for it
// (DATE 2001-01-01, TIME 10:00:00, DECIMAL exact, INTERVAL 1 year 2
// months..., lists, structs and maps in DuckDB's notation), nil for NULL,
// with each column's Kind. When another writer holds the database it reads
// the database's read replica if accept takes what the replica holds (see
// run.OpenReader).
//
// The database is attached read-only, the in-memory catalog is detached,
// external access is off and the configuration is locked before the
// statement runs, so nothing can write a database or a file, attach,
// install, load or change a setting. The text must be one statement, a
// SELECT (FROM, WITH, VALUES, DESCRIBE, SHOW, SUMMARIZE, PRAGMA table_info)
// or an EXPLAIN; anything else fails with ErrNotReadOnly before it runs.
// A database held by a writer (and no replica taken) gives a *LockedError.
func QueryTextReader(ctx context.Context, path, query string, opts run.OpenOptions, accept func(*run.ReplicaNote) bool) (*run.Rows, error) {
	return runQuery(ctx, path, query, opts, true, accept)
}

func runQuery(ctx context.Context, path, query string, opts run.OpenOptions, text bool, accept func(*run.ReplicaNote) bool) (*run.Rows, error) {
	stmts, err := run.CountStatements(query)
	if err != nil {
		return nil, fmt.Errorf("query: %w", catalog.TrimSQLError(err))
	}
	if stmts != 1 {
		return nil, fmt.Errorf("query: %w; this text has %d", ErrNotReadOnly, stmts)
	}
	opts.ReadOnly = true
	db, err := run.OpenReader(ctx, path, opts, accept)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// Everything runs on one connection: the lock below is global to the
	// DuckDB instance, and a new connection's setup could no longer run.
	conn, err := db.SQL().Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	defer conn.Close()
	if err := lockDown(ctx, conn); err != nil {
		return nil, err
	}
	info, err := inspect(ctx, conn, query)
	if err != nil {
		return nil, fmt.Errorf("query: %w", catalog.TrimSQLError(err))
	}
	if info.typ != duckdb.STATEMENT_TYPE_SELECT && info.typ != duckdb.STATEMENT_TYPE_EXPLAIN {
		return nil, fmt.Errorf("query: %w (SELECT, FROM, WITH, DESCRIBE, SHOW, SUMMARIZE, PRAGMA table_info, EXPLAIN), not %s",
			ErrNotReadOnly, statementName(info.typ))
	}
	if !text {
		rows, err := queryRows(ctx, conn, query)
		return rows.Rows, err
	}
	if info.typ == duckdb.STATEMENT_TYPE_SELECT {
		// DuckDB renders the values itself; query() takes the text as it
		// stands, trailing semicolon and comments included, and refuses
		// what is not a SELECT (PRAGMA table_info), which falls through.
		wrapped := "SELECT CAST(COLUMNS(*) AS VARCHAR) FROM query(" + sqltext.SQLString(query) + ")"
		if w, err := inspect(ctx, conn, wrapped); err == nil && len(w.names) == len(info.names) {
			rows, err := queryRows(ctx, conn, wrapped)
			if err != nil {
				return nil, err
			}
			rows.Columns = info.names
			rows.Kinds = info.kinds
			return rows.Rows, nil
		}
	}
	rows, err := queryRows(ctx, conn, query)
	if err != nil {
		return nil, err
	}
	rows.Kinds = info.kinds
	for _, r := range rows.Values {
		for i, v := range r {
			if v != nil {
				r[i] = textOf(v, rows.types[i])
			}
		}
	}
	return rows.Rows, nil
}

// lockDown makes the connection's DuckDB instance read-only for good. The
// file is already attached read-only; the writable in-memory catalog is
// detached, so no USE can leave the file to DETACH it and attach it again
// writable; external access off stops file reads and writes, ATTACH of
// files, INSTALL and LOAD; the lock stops any setting from being changed
// back.
func lockDown(ctx context.Context, conn *sql.Conn) error {
	for _, s := range []string{
		"DETACH memory",
		"SET enable_external_access = false",
		"SET lock_configuration = true",
	} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("query: make the database read-only (%s): %w", s, err)
		}
	}
	return nil
}

type stmtInfo struct {
	typ   duckdb.StmtType
	names []string
	kinds []run.Kind
}

// inspect prepares one statement without running it. A text of several
// statements must not come here: preparing it runs all but the last.
func inspect(ctx context.Context, conn *sql.Conn, query string) (stmtInfo, error) {
	var info stmtInfo
	err := conn.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return errors.New("driver cannot prepare")
		}
		st, err := pc.PrepareContext(ctx, query)
		if err != nil {
			return err
		}
		defer st.Close()
		ds, ok := st.(*duckdb.Stmt)
		if !ok {
			return errors.New("not a DuckDB statement")
		}
		if info.typ, err = ds.StatementType(); err != nil {
			return err
		}
		if ds.NumInput() > 0 {
			return errors.New("idem query takes no parameters: write the values in the SQL")
		}
		n, err := ds.ColumnCount()
		if err != nil {
			return err
		}
		for i := range n {
			name, err := ds.ColumnName(i)
			if err != nil {
				return err
			}
			t, err := ds.ColumnType(i)
			if err != nil {
				return err
			}
			info.names = append(info.names, name)
			info.kinds = append(info.kinds, kindOf(t))
		}
		return nil
	})
	return info, err
}

func kindOf(t duckdb.Type) run.Kind {
	switch t {
	case duckdb.TYPE_TINYINT, duckdb.TYPE_SMALLINT, duckdb.TYPE_INTEGER, duckdb.TYPE_BIGINT,
		duckdb.TYPE_UTINYINT, duckdb.TYPE_USMALLINT, duckdb.TYPE_UINTEGER, duckdb.TYPE_UBIGINT,
		duckdb.TYPE_HUGEINT, duckdb.TYPE_UHUGEINT, duckdb.TYPE_FLOAT, duckdb.TYPE_DOUBLE,
		duckdb.TYPE_DECIMAL, duckdb.TYPE_BIGNUM:
		return run.KindNumber
	case duckdb.TYPE_BOOLEAN:
		return run.KindBool
	default:
		return run.KindText
	}
}

func statementName(t duckdb.StmtType) string {
	switch t {
	case duckdb.STATEMENT_TYPE_INSERT:
		return "INSERT"
	case duckdb.STATEMENT_TYPE_UPDATE:
		return "UPDATE"
	case duckdb.STATEMENT_TYPE_DELETE:
		return "DELETE"
	case duckdb.STATEMENT_TYPE_CREATE, duckdb.STATEMENT_TYPE_CREATE_FUNC:
		return "CREATE"
	case duckdb.STATEMENT_TYPE_DROP:
		return "DROP"
	case duckdb.STATEMENT_TYPE_ALTER:
		return "ALTER"
	case duckdb.STATEMENT_TYPE_COPY:
		return "COPY"
	case duckdb.STATEMENT_TYPE_EXPORT:
		return "EXPORT"
	case duckdb.STATEMENT_TYPE_ATTACH:
		return "ATTACH"
	case duckdb.STATEMENT_TYPE_DETACH:
		return "DETACH"
	case duckdb.STATEMENT_TYPE_SET, duckdb.STATEMENT_TYPE_VARIABLE_SET:
		return "SET, USE or a setting PRAGMA"
	case duckdb.STATEMENT_TYPE_LOAD:
		return "INSTALL or LOAD"
	case duckdb.STATEMENT_TYPE_CALL:
		return "CALL or CHECKPOINT"
	case duckdb.STATEMENT_TYPE_TRANSACTION:
		return "a transaction statement"
	case duckdb.STATEMENT_TYPE_VACUUM, duckdb.STATEMENT_TYPE_ANALYZE:
		return "VACUUM or ANALYZE"
	default:
		return "this statement"
	}
}

// rowsWithTypes is Rows with each column's DuckDB type name.
type rowsWithTypes struct {
	*run.Rows
	types []string
}

func queryRows(ctx context.Context, conn *sql.Conn, query string) (rowsWithTypes, error) {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return rowsWithTypes{}, fmt.Errorf("query: %w", catalog.TrimSQLError(err))
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return rowsWithTypes{}, err
	}
	types := make([]string, len(cts))
	for i, ct := range cts {
		types[i] = ct.DatabaseTypeName()
	}
	out, err := run.Collect(rows)
	return rowsWithTypes{Rows: out, types: types}, err
}

// textOf renders a scanned value as DuckDB prints it, for the statements
// DuckDB cannot render itself (PRAGMA, EXPLAIN). Their columns are text
// and numbers; the time types, DECIMAL, INTERVAL, UUID and BLOB are covered
// too, nested values are printed as Go prints them.
func textOf(v any, typ string) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		if typ == "UUID" && len(x) == 16 {
			h := hex.EncodeToString(x)
			return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		}
		var b strings.Builder
		for _, c := range x {
			if c >= 0x20 && c < 0x7f && c != '\\' {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "\\x%02X", c)
			}
		}
		return b.String()
	case time.Time:
		return timeText(x, typ)
	case duckdb.Decimal:
		return decimalText(x)
	case *big.Int:
		return x.String()
	case duckdb.Interval:
		return intervalText(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	default:
		return fmt.Sprint(x)
	}
}

func timeText(t time.Time, typ string) string {
	frac := func(s string) string { return strings.TrimSuffix(strings.TrimRight(s, "0"), ".") }
	switch typ {
	case "DATE":
		return t.Format("2006-01-02")
	case "TIME":
		return frac(t.Format("15:04:05.000000"))
	case "TIMETZ":
		return frac(t.Format("15:04:05.000000")) + t.Format("-07")
	case "TIMESTAMPTZ":
		return frac(t.UTC().Format("2006-01-02 15:04:05.000000")) + "+00"
	default:
		return frac(t.Format("2006-01-02 15:04:05.000000000"))
	}
}

func decimalText(d duckdb.Decimal) string {
	if d.Value == nil {
		return "0"
	}
	s := new(big.Int).Abs(d.Value).String()
	scale := int(d.Scale)
	if scale > 0 {
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if d.Value.Sign() < 0 {
		s = "-" + s
	}
	return s
}

// intervalText is DuckDB's interval notation: 1 year 2 months 3 days
// 04:05:06.
func intervalText(iv duckdb.Interval) string {
	var parts []string
	unit := func(n int64, name string) {
		if n == 0 {
			return
		}
		s := strconv.FormatInt(n, 10) + " " + name
		if n != 1 && n != -1 {
			s += "s"
		}
		parts = append(parts, s)
	}
	unit(int64(iv.Months/12), "year")
	unit(int64(iv.Months%12), "month")
	unit(int64(iv.Days), "day")
	if us := iv.Micros; us != 0 {
		sign := ""
		if us < 0 {
			sign, us = "-", -us
		}
		s := fmt.Sprintf("%s%02d:%02d:%02d", sign, us/3_600_000_000, us/60_000_000%60, us/1_000_000%60)
		if f := us % 1_000_000; f != 0 {
			s += strings.TrimRight(fmt.Sprintf(".%06d", f), "0")
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "00:00:00"
	}
	return strings.Join(parts, " ")
}

// DuckDBVersion reports the bundled DuckDB's version.
func DuckDBVersion(ctx context.Context) (string, error) {
	db, err := run.OpenMemory(ctx, "")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.QueryRowContext(ctx, "SELECT version()").Scan(&v)
	return v, err
}
