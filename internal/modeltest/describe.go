package modeltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
)

// describer types the result columns of an upstream model that never
// committed, as its run would: DESCRIBE of its SELECT over the columns of
// its own upstreams (each as committed, by its schema, or described so in
// turn), with its macros, in a transaction of the scratch database that it
// rolls back. Nothing runs: only the types are read.
type describer struct {
	db   *run.DB
	m    *job.Job            // the model under test: whose database is read
	jobs map[string]*job.Job // the jobs of m's database, by name
}

// columns are the result columns of model name, or why they cannot be
// told (a job its SQL reads is not in the project, a column it reads is
// missing, a cycle).
func (d *describer) columns(ctx context.Context, name string) ([]catalog.TargetColumn, error) {
	conn, err := d.db.SQL().Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	return d.describe(ctx, tx, name, nil)
}

// describe types job name's target columns inside tx; path are the models
// being described that read it.
func (d *describer) describe(ctx context.Context, tx *sql.Tx, name string, path []string) ([]catalog.TargetColumn, error) {
	j := d.jobs[name]
	switch {
	case j == nil:
		return nil, fmt.Errorf("%s is no job of %s", name, d.m.Database)
	case slices.Contains(path, name):
		return nil, fmt.Errorf("upstream references form a cycle: %s → %s", strings.Join(path, " → "), name)
	}
	if cols := committedColumns(ctx, d.m.Database, name); len(cols) > 0 {
		return cols, nil
	}
	if !j.IsModel() {
		return schemaColumns(ctx, tx, j)
	}
	for _, u := range j.SortedUpstream() {
		cols, err := d.describe(ctx, tx, u, append(path, name))
		if err != nil {
			return nil, err
		}
		defs := make([]string, len(cols))
		for i, c := range cols {
			defs[i] = sqltext.QuoteIdent(c.Name) + " " + c.Type
		}
		if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+sqltext.QuoteIdent(seal.UpstreamRelation(u))+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return nil, fmt.Errorf("upstream %s of %s: %w", u, name, catalog.TrimSQLError(err))
		}
	}
	if err := run.CreateMacros(ctx, tx, j); err != nil {
		return nil, err
	}
	cols, err := run.DescribeColumns(ctx, tx, j.Expand(j.ModelSQL))
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", j.ModelFile, err)
	}
	return cols, nil
}

// schemaColumns are the columns job j's schema gives its target: the
// target's in the scratch database when the test made it (a shell of a job
// whose schema did not run is none), else those of its schema run in tx,
// which the caller rolls back.
func schemaColumns(ctx context.Context, tx *sql.Tx, j *job.Job) ([]catalog.TargetColumn, error) {
	cols, err := catalog.TargetColumns(ctx, tx, j.Table)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 && strings.TrimSpace(j.DDL) != "" {
		if err := run.ExecStatements(ctx, tx, j.Expand(j.DDL)); err != nil {
			return nil, fmt.Errorf("schema of %s: %w", j.Name, catalog.TrimSQLError(err))
		}
		if cols, err = catalog.TargetColumns(ctx, tx, j.Table); err != nil {
			return nil, err
		}
	}
	if len(cols) == 0 || slices.ContainsFunc(cols, func(c catalog.TargetColumn) bool { return c.Name == shellColumn }) {
		return nil, errors.New("the columns of " + j.Name + " are not known")
	}
	return cols, nil
}
