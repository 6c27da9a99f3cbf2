// Package sqltext owns SQL text as idem reads it without a database:
// comments and literals masked (MaskSQL), a text split into statements
// and checked against DuckDB's own count (Statements), the queries inside
// a statement, the relations a text creates, quoting (QuoteIdent,
// SQLString), the names idem accepts (Identifier), and readers of DuckDB's
// parse tree (json_serialize_sql: CTEQuery, CastType, OrderFree).
//
// It is pure: it must not import database/sql, DuckDB, or any idem
// package but internal/report. What asks DuckDB is given to it as a
// function (ParseFunc, CountFunc). runner/layering_test.go enforces this.
package sqltext
