package run

import (
	"container/list"
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"reflect"
	"strings"
	"unsafe"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"

	"github.com/idem-dev/idem/internal/sqltext"
)

// Prepared statements kept per connection, and connections kept between
// runs.
//
// DuckDB 2.0 parses SQL with a PEG parser that is 10-20 times slower than
// the one of DuckDB 1.5 (a SELECT of 50 columns: 0.40 ms against 0.02 ms;
// docs/benchmarks.md, "What a statement costs on DuckDB 2.0"), and every
// text sent through database/sql is parsed, bound and planned again. Most
// of what idem sends is the same text again and again: its catalog
// statements, a pipeline's expanded steps for each batch of a job. So each
// connection keeps the statements it prepared (up to stmtCacheSize, least
// recently used dropped) and runs a text it has seen before from its
// prepared statement. DuckDB rebinds a prepared statement itself when what
// it read changed (the catalog's version, a parameter's type, a function
// whose value is fixed per query such as getvariable or
// current_timestamp), so the cache changes no result.
//
// Only a text DuckDB reads as one statement is prepared: duckdb-go's
// PrepareContext runs every statement of a text but the last. A text of
// plain quoting (no dollar quotes, backslashes or block comments) in which
// idem's masking finds one statement is prepared when first seen; any
// other is counted by DuckDB's own parser first, on its second sighting (a
// text seen once is run as before). A CREATE VIEW is never kept
// (noteSession).
//
// For the kept statements to pay, a connection outlives one run: the pool
// keeps idle connections (openConnector), and before a kept connection is
// reused, ResetSession drops the temp tables and views a run left and
// resets its variables, so that no run sees another's
// session state. A connection that changed a session setting (a SET or
// PRAGMA that is not global, USE, ATTACH ...), made a temp macro,
// sequence or type, rolled back or saw a statement fail is closed instead.

// idleConns is how many idle connections a handle keeps.
const idleConns = 4

// stmtCacheSize bounds the statements a connection keeps.
const stmtCacheSize = 256

// seenLimit bounds the texts a connection remembers having seen once.
const seenLimit = 4096

// cachingConnector makes connections that keep their prepared statements.
type cachingConnector struct{ inner *duckdb.Connector }

func (c *cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	conn, ok := dc.(*duckdb.Conn)
	if !ok {
		return dc, nil
	}
	cc := &cachedConn{Conn: conn, lru: list.New(), stmts: map[string]*list.Element{}, seen: map[string]bool{}}
	cc.raw, cc.countable = driverConnection(conn)
	return cc, nil
}

func (c *cachingConnector) Driver() driver.Driver { return c.inner.Driver() }

// Close closes DuckDB's instance (sql.DB.Close calls it).
func (c *cachingConnector) Close() error { return c.inner.Close() }

type cachedStmt struct {
	text    string
	stmt    *duckdb.Stmt
	touches bool // a CREATE or a SET: it may leave session state
	catalog bool // it may create or alter a table or an index (makesCatalog)
}

// cachedConn is a DuckDB connection that keeps its prepared statements.
type cachedConn struct {
	*duckdb.Conn
	raw       mapping.Connection
	countable bool
	lru       *list.List // of *cachedStmt, most recently used first
	stmts     map[string]*list.Element
	seen      map[string]bool
	// session: a statement changed a setting of this connection.
	session bool
	// touched: a statement since the last reset may have left a temp
	// relation or a variable (a CREATE or a SET); ResetSession looks for
	// them only then.
	touched bool
	// catalog: a statement since the transaction began may have created
	// or altered a table or an index of a database (makesCatalog); the
	// commit's check for what must be checkpointed at once reads the
	// catalog only then (settle.go, checkpointNow).
	catalog bool
}

func (c *cachedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	var res driver.Result
	var err error
	if s := c.prepared(ctx, query); s != nil {
		res, err = s.ExecContext(ctx, args)
	} else {
		res, err = c.Conn.ExecContext(ctx, query, args)
	}
	c.retireOn(err)
	return res, err
}

func (c *cachedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	var rows driver.Rows
	var err error
	if s := c.prepared(ctx, query); s != nil {
		rows, err = s.QueryContext(ctx, args)
	} else {
		rows, err = c.Conn.QueryContext(ctx, query, args)
	}
	c.retireOn(err)
	return rows, err
}

// retireOn keeps a connection on which a statement failed from being
// reused: a failed statement rolls back what it did, and DuckDB 2.0.0
// mishandles a temp view made again after a rollback (BeginTx).
func (c *cachedConn) retireOn(err error) {
	if err != nil {
		c.session = true
	}
}

// prepared returns the kept statement of query, preparing it when the text
// may be kept (see the top of this file); nil when the text must run as
// before.
func (c *cachedConn) prepared(ctx context.Context, query string) *duckdb.Stmt {
	if e, ok := c.stmts[query]; ok {
		cs := e.Value.(*cachedStmt)
		// What the text may leave, marked however it runs.
		c.touched = c.touched || cs.touches
		c.catalog = c.catalog || cs.catalog
		if stmtBusy(cs.stmt) {
			// Its rows are still open (a query run inside the reading of
			// the same query): run this one on its own.
			return nil
		}
		c.lru.MoveToFront(e)
		return cs.stmt
	}
	keep, single, touch, catalog := c.noteSession(query)
	if !keep {
		return nil
	}
	// A text of plain quoting that idem's reading finds one statement in
	// is prepared at once: quotes, comments and semicolons without dollar
	// quotes, backslashes or block comments read the same in idem's masking
	// and DuckDB's lexer. Any other text is counted by DuckDB's parser, on
	// its second sighting.
	if !single || !plainText(query) {
		if !c.countable {
			return nil
		}
		if !c.seen[query] {
			if len(c.seen) >= seenLimit {
				clear(c.seen)
			}
			c.seen[query] = true
			return nil
		}
		if !c.oneStatement(query) {
			return nil
		}
	}
	st, err := c.Conn.PrepareContext(ctx, query)
	if err != nil {
		// Run as before, so that the error is the one it always was.
		return nil
	}
	s, ok := st.(*duckdb.Stmt)
	if !ok {
		_ = st.Close()
		return nil
	}
	delete(c.seen, query)
	c.stmts[query] = c.lru.PushFront(&cachedStmt{text: query, stmt: s, touches: touch, catalog: catalog})
	for c.lru.Len() > stmtCacheSize {
		last := c.lru.Back()
		cs := last.Value.(*cachedStmt)
		if stmtBusy(cs.stmt) {
			break
		}
		c.lru.Remove(last)
		delete(c.stmts, cs.text)
		_ = cs.stmt.Close()
	}
	return s
}

// oneStatement reports whether DuckDB's parser reads query as exactly one
// statement.
func (c *cachedConn) oneStatement(query string) bool {
	var stmts mapping.ExtractedStatements
	n := mapping.ExtractStatements(c.raw, query, &stmts)
	mapping.DestroyExtracted(&stmts)
	return n == 1
}

// noteSession marks the connection when query changes one of its own
// settings: such a connection is closed rather than reused. A SET of a
// global setting (threads, or SET GLOBAL), SET VARIABLE and RESET VARIABLE
// leave nothing ResetSession does not clear. It reports whether the text
// may be kept: not a CREATE VIEW, which DuckDB 2.0.0 runs wrongly from a
// prepared statement whose last run was rolled back (the view made then
// has no query: reading it is an INTERNAL error, "Attempted to dereference
// unique_ptr that is NULL"; TestKeptStatementsSeeChanges). single
// reports whether idem's masking finds one statement in the text, touch
// whether it is a CREATE or a SET, which may leave a temp relation or a
// variable in the session (it marks the connection touched), catalog
// whether it may create or alter a table or an index (makesCatalog: it
// marks the connection's transaction).
func (c *cachedConn) noteSession(query string) (keep, single, touch, catalog bool) {
	masked := sqltext.MaskSQL(query)
	single = !strings.Contains(strings.TrimRight(masked, " \t\r\n;"), ";")
	catalog = makesCatalog(masked)
	c.catalog = c.catalog || catalog
	keep = true
	// Each statement of the text by its first words: what a text's second
	// statement leaves counts as what its first does (masking leaves a ;
	// only between statements).
	for _, stmt := range strings.Split(masked, ";") {
		words := strings.Fields(stmt)
		if len(words) == 0 {
			continue
		}
		first := strings.ToUpper(words[0])
		touch = touch || first == "CREATE" || first == "SET"
		switch first {
		case "CREATE":
			// A view is not kept (above). A temp macro, sequence or type
			// outlives its run in the session, and ResetSession clears
			// only tables, views and variables: its connection is not
			// reused.
			for _, w := range words[1:min(len(words), 6)] {
				switch strings.ToUpper(w) {
				case "VIEW":
					keep = false
				case "MACRO", "FUNCTION", "SEQUENCE", "TYPE":
					c.session = true
				}
			}
		case "SET", "RESET":
			second := ""
			if len(words) > 1 {
				second, _, _ = strings.Cut(strings.ToUpper(words[1]), "=")
			}
			switch second {
			case "VARIABLE", "GLOBAL", "THREADS", "WORKER_THREADS":
			default:
				c.session = true
			}
		case "PRAGMA", "USE", "ATTACH", "DETACH", "LOAD", "INSTALL", "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "PREPARE", "EXECUTE", "DEALLOCATE", "CALL":
			c.session = true
		}
	}
	c.touched = c.touched || touch
	return keep, single, touch, catalog
}

// makesCatalog reports whether a masked text (sqltext.MaskSQL) may create
// or alter a table or an index of a database: it holds, outside strings
// and comments, the word CREATE not followed by TEMP or TEMPORARY (past OR
// REPLACE), or the word ALTER, COPY or IMPORT. It errs towards true: a
// temp table named in full (CREATE TABLE temp.main.t), a quoted identifier
// spelled create or an EXPLAIN of a CREATE count too, which only costs the
// catalog read the answer saves.
func makesCatalog(masked string) bool {
	words := strings.FieldsFunc(masked, func(r rune) bool {
		return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= 0x80)
	})
	for i, w := range words {
		switch strings.ToUpper(w) {
		case "ALTER", "COPY", "IMPORT":
			return true
		case "CREATE":
			// CREATE [OR REPLACE] TEMP|TEMPORARY: the next word past OR
			// and REPLACE.
			next := ""
			for _, n := range words[i+1:] {
				if u := strings.ToUpper(n); u != "OR" && u != "REPLACE" {
					next = u
					break
				}
			}
			if next != "TEMP" && next != "TEMPORARY" {
				return true
			}
		}
	}
	return false
}

// catalogChanged reports whether a statement run on conn since its
// transaction began may have created or altered a table or an index:
// true when conn is not a kept connection, whose statements idem does not
// see, or cannot be read.
func catalogChanged(conn *sql.Conn) bool {
	changed := true
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(*cachedConn); ok {
			changed = c.catalog
		}
		return nil
	})
	return changed
}

// PrepareContext prepares a statement run outside the kept ones (its
// runs do not come through this connection): the session is read at the
// next reset, whatever it runs.
func (c *cachedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.touched = true
	c.noteSession(query)
	return c.Conn.PrepareContext(ctx, query)
}

// Prepare is PrepareContext without a context.
func (c *cachedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// plainText reports whether query quotes only plainly: no dollar quote, no
// backslash (an E'...' escape), no block comment.
func plainText(query string) bool {
	return !strings.ContainsAny(query, "$\\") && !strings.Contains(query, "/*")
}

// sessionObjects lists what a connection's session holds: its temp
// tables and views, and its variables (a connection that made a temp
// macro, sequence or type is closed instead: noteSession).
const sessionObjects = `SELECT 'TABLE', table_name FROM duckdb_tables() WHERE database_name = 'temp'
UNION ALL SELECT 'VIEW', view_name FROM duckdb_views() WHERE database_name = 'temp' AND NOT internal
UNION ALL SELECT 'VARIABLE', name FROM duckdb_variables()`

// ResetSession readies a kept connection for its next user: it drops the
// session objects a run left and resets its variables. A connection that
// changed a session setting, or whose clearing fails, is closed
// (driver.ErrBadConn) and the pool opens a new one.
func (c *cachedConn) ResetSession(ctx context.Context) error {
	if c.session {
		return driver.ErrBadConn
	}
	if !c.touched {
		return nil
	}
	rows, err := c.QueryContext(ctx, sessionObjects, nil)
	if err != nil {
		return driver.ErrBadConn
	}
	var drops []string
	dest := make([]driver.Value, 2)
	for {
		if err := rows.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			_ = rows.Close()
			return driver.ErrBadConn
		}
		kind, _ := dest[0].(string)
		name, _ := dest[1].(string)
		if kind == "VARIABLE" {
			drops = append(drops, "RESET VARIABLE "+sqltext.QuoteIdent(name))
			continue
		}
		drops = append(drops, "DROP "+kind+" IF EXISTS temp.main."+sqltext.QuoteIdent(name))
	}
	if err := rows.Close(); err != nil {
		return driver.ErrBadConn
	}
	c.touched = false
	// The same few drops come back at every reset (the input view,
	// idem's variables): they are kept like any other text.
	for _, d := range drops {
		if _, err := c.ExecContext(ctx, d, nil); err != nil {
			return driver.ErrBadConn
		}
	}
	return nil
}

// BeginTx begins a transaction whose rollback retires the connection:
// DuckDB 2.0.0 fails to bind a temp view made again on a connection whose
// transaction that made it rolled back (an INTERNAL error, "Attempted to
// dereference unique_ptr that is NULL"; TestFailureBeforeCommitChangesNothing
// and TestRunTogether find it when such a connection is reused), so a
// connection that rolled back is not reused.
func (c *cachedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.catalog = false
	return &retiringTx{Tx: tx, c: c}, nil
}

// Begin is BeginTx with no options.
func (c *cachedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

type retiringTx struct {
	driver.Tx
	c *cachedConn
}

func (t *retiringTx) Commit() error {
	err := t.Tx.Commit()
	t.c.retireOn(err)
	return err
}

func (t *retiringTx) Rollback() error {
	t.c.session = true
	return t.Tx.Rollback()
}

// IsValid reports whether the connection may go back to the pool.
func (c *cachedConn) IsValid() bool { return !c.session }

// Close closes the kept statements, then the connection.
func (c *cachedConn) Close() error {
	for e := c.lru.Front(); e != nil; e = e.Next() {
		if cs := e.Value.(*cachedStmt); !stmtBusy(cs.stmt) {
			_ = cs.stmt.Close()
		}
	}
	c.lru.Init()
	clear(c.stmts)
	return c.Conn.Close()
}

// stmtBusy reports whether the statement's rows are open (duckdb-go keeps
// that unexported; a duckdb-go without the field reads as busy, so that
// nothing is reused against its rules).
func stmtBusy(s *duckdb.Stmt) bool {
	f := reflect.ValueOf(s).Elem().FieldByName("rows")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		return true
	}
	return f.Bool()
}

// driverConnection reads the DuckDB connection handle duckdb-go keeps
// unexported in its Conn (see rawConnection).
func driverConnection(conn *duckdb.Conn) (mapping.Connection, bool) {
	var c mapping.Connection
	v := reflect.ValueOf(conn)
	f := v.Elem().FieldByName("conn")
	if !f.IsValid() || f.Type() != reflect.TypeFor[mapping.Connection]() {
		return c, false
	}
	c = *(*mapping.Connection)(unsafe.Pointer(f.UnsafeAddr()))
	return c, c.Ptr != nil
}
