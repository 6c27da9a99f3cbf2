package run

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// The statement counter: DuckDB's own parser, in an in-memory DuckDB of
// its own, so that idem splits and counts statements as the engine that
// runs them does (sqltext.Statements). The parser keeps no state between
// texts; one instance serves the process, opened on first use (about a
// millisecond) and used under a lock (a parse takes microseconds).
var parser struct {
	once sync.Once
	mu   sync.Mutex
	db   mapping.Database
	conn mapping.Connection
	err  error
}

// statementCounts memoizes CountStatements' answers by text (guardKey):
// a run splits each step, then checks each statement again before it runs
// it, and a project or a batch loop runs the same texts again. It is the
// process's, not a handle's: the parser's answer depends on the text and
// the engine alone.
var statementCounts = newGuardCache()

type counted struct {
	n   int
	err error
}

// CountStatements returns how many statements DuckDB's parser reads in
// text, without running any. A text DuckDB cannot parse gives its parse
// error.
func CountStatements(text string) (int, error) {
	if err := openParser(); err != nil {
		return 0, err
	}
	k := guardKey("statements", text)
	if c, ok := statementCounts.get(k); ok {
		c := c.(counted)
		return c.n, c.err
	}
	parser.mu.Lock()
	n, err := countStatements(text)
	parser.mu.Unlock()
	statementCounts.put(k, counted{n, err})
	return n, err
}

// openParser opens the process's parser DuckDB on first use.
func openParser() error {
	parser.once.Do(func() {
		if mapping.Open("", &parser.db) == mapping.StateError {
			parser.err = errors.New("open a DuckDB to parse SQL")
			return
		}
		if mapping.Connect(parser.db, &parser.conn) == mapping.StateError {
			parser.err = errors.New("connect to a DuckDB to parse SQL")
		}
	})
	return parser.err
}

// countStatements asks the parser; parser.mu is held.
func countStatements(text string) (int, error) {
	var stmts mapping.ExtractedStatements
	n := mapping.ExtractStatements(parser.conn, text, &stmts)
	defer mapping.DestroyExtracted(&stmts)
	if n == 0 {
		if msg := mapping.ExtractStatementsError(stmts); msg != "" {
			return 0, errors.New(msg)
		}
	}
	return int(n), nil
}

// engine holds what DuckDB's function catalog says of its functions, read
// once a process: it is the engine's, the same for every database.
var engine struct {
	mu    sync.Mutex
	funcs *seal.Functions
}

// EngineFunctions is what DuckDB's function catalog says of its functions
// (seal.NewFunctions): which are volatile or read the session, which views
// read the catalog. For the engine idem is built with, the answer is the
// one recorded in internal/seal/enginefuncs_gen.go (listing the catalog
// costs 20-60 ms a process); TestEngineFunctionsRecorded proves the record
// equal to the engine's catalog, and rewrites it with -update. Any other
// engine is asked through q, once a process.
func EngineFunctions(ctx context.Context, q catalog.Querier) (*seal.Functions, error) {
	engine.mu.Lock()
	defer engine.mu.Unlock()
	if engine.funcs != nil {
		return engine.funcs, nil
	}
	if f := seal.RecordedFunctions(mapping.LibraryVersion()); f != nil {
		engine.funcs = f
		return f, nil
	}
	f, err := readEngineFunctions(ctx, q)
	if err != nil {
		return nil, err
	}
	engine.funcs = f
	return f, nil
}

// readEngineFunctions lists DuckDB's function catalog and its internal
// views through q.
func readEngineFunctions(ctx context.Context, q catalog.Querier) (*seal.Functions, error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT function_name, function_type, coalesce(stability, ''), coalesce(CAST(macro_definition AS VARCHAR), '')
		FROM duckdb_functions() WHERE stability IS DISTINCT FROM 'CONSISTENT' OR function_name ILIKE 'pg\_%' ESCAPE '\' ORDER BY ALL`)
	if err != nil {
		return nil, fmt.Errorf("read DuckDB's functions: %w", err)
	}
	defer rows.Close()
	var infos []seal.FunctionInfo
	for rows.Next() {
		var in seal.FunctionInfo
		if err := rows.Scan(&in.Name, &in.Type, &in.Stability, &in.Macro); err != nil {
			return nil, fmt.Errorf("read DuckDB's functions: %w", err)
		}
		infos = append(infos, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read DuckDB's functions: %w", err)
	}
	vrows, err := q.QueryContext(ctx, "SELECT DISTINCT view_name, schema_name FROM duckdb_views() WHERE internal ORDER BY ALL")
	if err != nil {
		return nil, fmt.Errorf("read DuckDB's catalog views: %w", err)
	}
	defer vrows.Close()
	var views [][2]string
	for vrows.Next() {
		var v [2]string
		if err := vrows.Scan(&v[0], &v[1]); err != nil {
			return nil, fmt.Errorf("read DuckDB's catalog views: %w", err)
		}
		views = append(views, v)
	}
	if err := vrows.Err(); err != nil {
		return nil, fmt.Errorf("read DuckDB's catalog views: %w", err)
	}
	return seal.NewFunctions(infos, views), nil
}

// SealParser is the seal.Parser of a seal check through q: queries (the
// texts sqltext.QueryTexts finds) parsed in one round trip, DuckDB's statement
// counter and its function catalog.
func SealParser(ctx context.Context, q catalog.Querier, queries []string) (seal.Parser, error) {
	parse, err := parseAll(ctx, q, queries)
	if err != nil {
		return seal.Parser{}, err
	}
	funcs, err := EngineFunctions(ctx, q)
	if err != nil {
		return seal.Parser{}, err
	}
	return seal.Parser{Parse: parse, Count: CountStatements, Funcs: funcs}, nil
}

// ErrSeveralStatements is a text idem runs as one statement that DuckDB's
// parser reads as several (sqltext.One); it is refused before anything runs.
var ErrSeveralStatements = errors.New("DuckDB's parser reads several statements in a text idem runs as one; nothing of it ran")

// OneStatement refuses text (user SQL, or a query of idem's that wraps it)
// when DuckDB's parser reads it as several statements: the driver would
// run every one of them, and idem checked one.
func OneStatement(text string) error {
	if err := sqltext.One(text, CountStatements); err != nil {
		return fmt.Errorf("%w (%v)", ErrSeveralStatements, err)
	}
	return nil
}

// ExecStatements runs text (a schema file, a step) on q one statement at
// a time, as DuckDB's parser splits it and idem reads it
// (sqltext.Statements): a text the two split differently runs nothing.
func ExecStatements(ctx context.Context, q catalog.Querier, text string) error {
	spans, err := sqltext.Statements(text, CountStatements)
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrSeveralStatements, err)
	}
	for _, sp := range spans {
		if _, err := q.ExecContext(ctx, text[sp.Start:sp.End]); err != nil {
			return err
		}
	}
	return nil
}
