// Package jobfs owns reading the files of a job and of its pipeline
// safely: bounds on their size and nesting, checked before a TOML file is
// decoded (bounds.go: ReadJobFile, CheckTOMLBounds, ReadSQLFile), a
// pipeline folder on disk opened only inside itself (confined.go:
// ConfinedFS, ReadConfined, Within), and errors that name a TOML key's
// file and line (tomlpos.go: KeyErrors, KeyLine, TOMLError).
//
// It is pure: it must not import database/sql, DuckDB, or any idem
// package but internal/report. runner/layering_test.go enforces this.
package jobfs
