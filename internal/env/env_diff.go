package env

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/diff"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Diff compares what an environment built of one job with production's
// latest snapshot of it: From is production, To the environment.
type Diff struct {
	diff.Result
	Environment string `json:"environment"`
	// Reason is why the environment built the job.
	Reason string `json:"reason"`
	// Numeric sums and bounds, for each numeric column both sides share
	// (the key aside), the differences environment minus production over
	// the rows whose key both hold.
	Numeric []NumericDifference `json:"numeric"`
	// New says production has no snapshot of the job: every row is added.
	New bool `json:"new,omitempty"`
	// Moved names the upstreams read from production that production has
	// moved past since the environment was built ("trips 4 → 5"): the
	// differences then mix the change with production's newer rows, and
	// promote is refused until the environment is rebuilt.
	Moved []string `json:"moved,omitempty"`
	// Edited names what the job's files now give otherwise than the
	// environment was built from ("model SQL ..."): the rows shown are
	// not those of the files, and promote is refused until the
	// environment is rebuilt.
	Edited []string `json:"edited,omitempty"`
}

// NumericDifference is the sum and the largest absolute value of one
// numeric column's differences over the rows paired by key.
type NumericDifference struct {
	Column string `json:"column"`
	Sum    string `json:"sum"`
	MaxAbs string `json:"max_abs"`
}

// DiffEnvironment compares job j as built in the environment open in d
// (production attached as ProductionCatalog: OpenOptions) with
// production's latest snapshot of it. Each side's sha256 is that of its
// canonical export, as idem export writes it.
func DiffEnvironment(ctx context.Context, d *run.DB, env *Environment, e Job, j *job.Job) (*Diff, error) {
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer tx.Rollback()
	to, err := export.PinnedSource(ctx, tx, j, "", 0)
	if err != nil {
		return nil, fmt.Errorf("environment %s: %w", env.Name, err)
	}
	if to.Snapshot != e.Snapshot {
		return nil, report.Refuse("environment", "environment %s holds snapshot %d of %s, not the %d its build recorded: run --env %s again", env.Name, to.Snapshot, j.Name, e.Snapshot, env.Name)
	}
	from, err := attachedSource(ctx, tx, ProductionCatalog, j, to)
	if err != nil {
		return nil, err
	}
	res := &Diff{Environment: env.Name, Reason: e.Reason, Numeric: []NumericDifference{}}
	res.Job, res.Table = j.Name, j.Table
	res.From, res.To = diff.Side{Snapshot: from.Snapshot}, diff.Side{Snapshot: to.Snapshot}
	res.New = from.Snapshot == 0
	built, err := catalog.ReadState(ctx, tx, j.Name)
	if err != nil {
		return nil, err
	}
	if built.HasParts {
		res.Edited = definitionChanges(j, built.Parts, fileParts(j, built.Parts))
	}
	for _, ref := range e.Upstream {
		if u, ok := env.Find(ref.Job); ok && u.Build {
			continue
		}
		st, err := catalog.ReadStateIn(ctx, tx, ProductionCatalog, ref.Job)
		if err != nil {
			return nil, err
		}
		if st.Snapshot != ref.Snapshot {
			var oldest int64
			err := tx.QueryRowContext(ctx, "SELECT oldest_kept FROM "+sqltext.QuoteIdent(ProductionCatalog)+".idem.retention WHERE job = ?", ref.Job).Scan(&oldest)
			if err == nil && oldest > ref.Snapshot {
				return nil, report.Refuse("environment", "environment %s is older than production's retention: %s read upstream %s at snapshot %d, which production has expired (its oldest kept snapshot is %d); rebuild it with idem run --env %s",
					env.Name, e.Job, ref.Job, ref.Snapshot, oldest, env.Name)
			}
			res.Moved = append(res.Moved, fmt.Sprintf("%s %d → %d", ref.Job, ref.Snapshot, st.Snapshot))
		}
	}
	if err := canonicalSums(ctx, tx, [2]*export.TableSource{from, to}, [2]*diff.Side{&res.From, &res.To}); err != nil {
		return nil, err
	}
	if !slices.Equal(from.Columns, to.Columns) || !slices.Equal(from.Types, to.Types) {
		if res.New {
			from.Columns, from.Types = to.Columns, to.Types
			from.Query = "SELECT " + export.IdentList(to.Columns) + " FROM (" + from.Query + ")"
		} else if err := diff.CommonColumns(from, to, &res.Result); err != nil {
			return nil, err
		}
	}
	if err := diff.CompareRows(ctx, tx, from.Query, to.Query, from.Columns, from.Key, 0, &res.Result); err != nil {
		return nil, err
	}
	if len(from.Key) < len(from.Columns) {
		on, _ := diff.PairConditions(from.Columns, from.Key)
		for i, c := range from.Columns {
			if slices.Contains(from.Key, c) || !diff.NumericType(from.Types[i]) {
				continue
			}
			qc := sqltext.QuoteIdent(c)
			delta := "(b." + qc + " - a." + qc + ")"
			var sum, maxAbs sql.NullString
			q := "SELECT CAST(sum(" + delta + ") AS VARCHAR), CAST(max(abs(" + delta + ")) AS VARCHAR) FROM (" + from.Query + ") AS a JOIN (" + to.Query + ") AS b ON " + on
			if err := tx.QueryRowContext(ctx, q).Scan(&sum, &maxAbs); err != nil {
				return nil, fmt.Errorf("diff %s: column %s: %w", j.Name, c, catalog.TrimSQLError(err))
			}
			res.Numeric = append(res.Numeric, NumericDifference{Column: c, Sum: nullOr(sum, "0"), MaxAbs: nullOr(maxAbs, "0")})
		}
	}
	return res, nil
}

func nullOr(s sql.NullString, dflt string) string {
	if s.Valid {
		return s.String
	}
	return dflt
}

// attachedSource is the read of the latest snapshot of j's target in the
// idem database attached as cat (production in an environment, the
// environment in promote), keyed as the other side (like): an empty read
// of like's columns when that database has no snapshot of j.
func attachedSource(ctx context.Context, q catalog.Querier, cat string, j *job.Job, like *export.TableSource) (*export.TableSource, error) {
	st, err := catalog.ReadStateIn(ctx, q, cat, j.Name)
	if err != nil {
		return nil, err
	}
	src := &export.TableSource{Table: j.Table, Key: like.Key, Unique: like.Unique}
	if !st.Exists || st.Snapshot == 0 || st.Target == "" {
		src.Columns, src.Types = like.Columns, like.Types
		src.Query = "SELECT " + export.IdentList(like.Columns) + " FROM (" + like.Query + ") WHERE false"
		return src, nil
	}
	src.Snapshot = st.Snapshot
	table := sqltext.QuoteIdent(cat) + ".main." + sqltext.QuoteIdent(st.Target)
	cols, err := catalog.AttachedColumns(ctx, q, cat, st.Target)
	if err != nil {
		return nil, err
	}
	for _, c := range cols {
		src.Columns, src.Types = append(src.Columns, c.Name), append(src.Types, c.Type)
	}
	if !like.Unique {
		src.Key = src.Columns
	}
	src.Query = "SELECT " + export.IdentList(src.Columns) + " FROM " + table
	return src, nil
}

// canonicalSums fills each side's rows and sha256: those of its canonical
// export (csv in key order), the bytes idem export writes.
func canonicalSums(ctx context.Context, q catalog.Querier, srcs [2]*export.TableSource, sides [2]*diff.Side) error {
	dir, err := os.MkdirTemp("", "idem-env-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for i, src := range srcs {
		n, sum, _, err := export.CopyTo(ctx, q, src.Ordered(), filepath.Join(dir, fmt.Sprintf("%d.csv", i)), job.FormatCSV, "", report.Progress{}, nil)
		if err != nil {
			return err
		}
		sides[i].Rows, sides[i].SHA256 = n, sum
	}
	return nil
}
