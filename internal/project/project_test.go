package project

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
)

func mk(db, name string, up ...string) *job.Job {
	j := &job.Job{Name: name, Database: db, File: name + ".toml"}
	j.Input.Upstream = up
	return j
}

func names(jobs []*job.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return out
}

// chain: zones and trips feed trips_clean, which feeds trips_daily and
// trips_weekly; other lives in another database.
func chain() []*job.Job {
	return []*job.Job{
		mk("a.duckdb", "trips_daily", "trips_clean"),
		mk("a.duckdb", "trips_weekly", "trips_clean"),
		mk("a.duckdb", "trips_clean", "zones", "trips"),
		mk("b.duckdb", "other"),
		mk("a.duckdb", "zones"),
		mk("a.duckdb", "trips"),
	}
}

func TestOrder(t *testing.T) {
	p, err := New(chain())
	require.NoError(t, err)
	require.Equal(t, []string{"trips", "zones", "trips_clean", "trips_daily", "trips_weekly", "other"}, names(p.Jobs))
	// The same jobs in another order give the same run order.
	j := chain()
	j[0], j[5] = j[5], j[0]
	q, err := New(j)
	require.NoError(t, err)
	require.Equal(t, names(p.Jobs), names(q.Jobs))
	// An upstream outside the project is the run's to read.
	r, err := New([]*job.Job{mk("a.duckdb", "trips_daily", "trips_clean")})
	require.NoError(t, err)
	require.Empty(t, r.Upstream(r.Jobs[0]))
	// Same name in another database is another job, and not an upstream.
	s, err := New([]*job.Job{mk("b.duckdb", "x", "y"), mk("a.duckdb", "y")})
	require.NoError(t, err)
	require.Empty(t, s.Upstream(s.Jobs[1]))
}

func TestOrderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		jobs []*job.Job
		want string
	}{
		{"cycle of two", []*job.Job{mk("a", "x", "y"), mk("a", "y", "x")}, "upstream references form a cycle: x → y → x"},
		{"cycle behind a good job", []*job.Job{mk("a", "s"), mk("a", "b", "s", "d"), mk("a", "c", "b"), mk("a", "d", "c")}, "cycle: b → c → d → b"},
		{"defined twice", []*job.Job{mk("a", "x"), mk("a", "x")}, "job x is defined twice for database a: in x.toml and in x.toml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.jobs)
			require.ErrorContains(t, err, tc.want)
			require.ErrorIs(t, err, report.ErrUsage)
		})
	}
}

func TestSelect(t *testing.T) {
	p, err := New(chain())
	require.NoError(t, err)
	for _, tc := range []struct {
		sel  []string
		want []string
	}{
		{nil, []string{"trips", "zones", "trips_clean", "trips_daily", "trips_weekly", "other"}},
		{[]string{"trips_clean"}, []string{"trips_clean"}},
		{[]string{"trips_clean+"}, []string{"trips_clean", "trips_daily", "trips_weekly"}},
		{[]string{"+trips_clean"}, []string{"trips", "zones", "trips_clean"}},
		{[]string{"+trips_daily"}, []string{"trips", "zones", "trips_clean", "trips_daily"}},
		{[]string{"zones+"}, []string{"zones", "trips_clean", "trips_daily", "trips_weekly"}},
		{[]string{"+trips_clean+"}, []string{"trips", "zones", "trips_clean", "trips_daily", "trips_weekly"}},
		{[]string{"other", "trips_daily"}, []string{"trips_daily", "other"}},
	} {
		q, err := p.Select(tc.sel)
		require.NoError(t, err, tc.sel)
		require.Equal(t, tc.want, names(q.Jobs), tc.sel)
	}
	_, err = p.Select([]string{"nope+"})
	require.ErrorContains(t, err, "--select nope+: no job named nope in the project (jobs: other, trips, trips_clean, trips_daily, trips_weekly, zones)")
	_, err = p.Select([]string{"a+b"})
	require.ErrorContains(t, err, `--select "a+b": want NAME, tag:TAG, path:PATH or state:modified`)
	// A selection keeps only the links among its jobs.
	q, _ := p.Select([]string{"trips_clean+"})
	require.Empty(t, q.Upstream(q.Jobs[0]))
}

// TestSelectors: tag:, path: and state:modified, with + on either side,
// and what each refuses.
func TestSelectors(t *testing.T) {
	t.Parallel()
	jobs := chain()
	for _, j := range jobs {
		switch j.Name {
		case "trips_daily", "trips_weekly":
			j.Tags = []string{"mart", "nightly"}
			j.File = filepath.Join("marts", j.Name+".toml")
		case "trips":
			j.Tags = []string{"nightly"}
		}
	}
	p, err := New(jobs)
	require.NoError(t, err)
	by := map[string]*job.Job{}
	for _, j := range p.Jobs {
		by[j.Name] = j
	}
	calls := 0
	modified := func() (map[*job.Job]bool, error) {
		calls++
		return map[*job.Job]bool{by["trips_clean"]: true}, nil
	}
	for _, tc := range []struct {
		sel  []string
		want []string
	}{
		{[]string{"tag:mart"}, []string{"trips_daily", "trips_weekly"}},
		{[]string{"tag:nightly"}, []string{"trips", "trips_daily", "trips_weekly"}},
		{[]string{"+tag:mart"}, []string{"trips", "zones", "trips_clean", "trips_daily", "trips_weekly"}},
		{[]string{"path:marts"}, []string{"trips_daily", "trips_weekly"}},
		{[]string{"path:marts/*_daily.toml"}, []string{"trips_daily"}},
		{[]string{"path:zones.toml+"}, []string{"zones", "trips_clean", "trips_daily", "trips_weekly"}},
		{[]string{"state:modified"}, []string{"trips_clean"}},
		{[]string{"state:modified+", "+state:modified", "other"}, []string{"trips", "zones", "trips_clean", "trips_daily", "trips_weekly", "other"}},
	} {
		q, err := p.SelectWith(tc.sel, modified)
		require.NoError(t, err, tc.sel)
		require.Equal(t, tc.want, names(q.Jobs), tc.sel)
	}
	require.Equal(t, 2, calls, "state:modified asks once per selection")
	for _, tc := range []struct {
		sel  string
		want string
	}{
		{"tag:daily", "--select tag:daily: no job of the project has tag daily (tags: mart, nightly)"},
		{"path:nowhere", "--select path:nowhere: no job file of the project is nowhere, under it or matches it"},
		{"state:fresh", "--select state:fresh: the state selector is state:modified"},
		{"owner:me", `--select "owner:me": want NAME, tag:TAG, path:PATH or state:modified`},
	} {
		_, err := p.SelectWith([]string{tc.sel}, modified)
		require.ErrorIs(t, err, report.ErrUsage)
		require.ErrorContains(t, err, tc.want)
	}
	_, err = p.Select([]string{"state:modified"})
	require.ErrorContains(t, err, "state:modified needs the jobs' databases")
}

func TestBlockedAndGroups(t *testing.T) {
	p, err := New(chain())
	require.NoError(t, err)
	by := map[string]*job.Job{}
	for _, j := range p.Jobs {
		by[j.Name] = j
	}
	failed := map[*job.Job]bool{by["zones"]: true}
	require.Equal(t, []string{"zones"}, p.BlockedBy(by["trips_clean"], failed))
	require.Equal(t, []string{"zones"}, p.BlockedBy(by["trips_daily"], failed))
	require.Empty(t, p.BlockedBy(by["trips"], failed))
	require.Empty(t, p.BlockedBy(by["other"], failed))
	failed[by["trips"]] = true
	require.Equal(t, []string{"trips", "zones"}, p.BlockedBy(by["trips_weekly"], failed))

	g := p.Groups()
	require.Len(t, g, 2)
	require.Equal(t, []string{"trips", "zones", "trips_clean", "trips_daily", "trips_weekly"}, names(g[0]))
	require.Equal(t, []string{"other"}, names(g[1]))
}

// TestFiles: a folder's job files are its *.toml files that set pipeline
// at their top level; pipeline.toml, other files and another tool's TOML
// (sqlfluff.toml, a pipeline key inside a table) are not read as jobs.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	for f, text := range map[string]string{"b.toml": "name = \"b\"\npipeline = \"select\"\n", "a.toml": "# a job\n\"pipeline\" = \"x\"\n", "notes.txt": "",
		"sub/c.toml": "", "pipeline.toml": "pipeline = \"p\"\n", "sqlfluff.toml": "[sqlfluff]\ndialect = \"duckdb\"\n", "other.toml": "[tool]\npipeline = \"not a job\"\n"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644))
	}
	got, err := Files([]string{dir, filepath.Join(dir, "a.toml"), filepath.Join(dir, "sub", "c.toml")})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "a.toml"), filepath.Join(dir, "b.toml"), filepath.Join(dir, "sub", "c.toml")}, got)
	_, err = Files([]string{filepath.Join(dir, "sub", "..", "sub2")})
	require.NoError(t, err) // a missing path is the loader's to report
	empty := t.TempDir()
	_, err = Files([]string{empty})
	require.ErrorContains(t, err, "holds no job files (*.toml with pipeline = ...)")
	require.ErrorIs(t, err, report.ErrUsage)
}

// TestOrderRelationshipsAudit: a job runs after the jobs its relationships
// audits check against, though it does not read them, so that the audit
// reads what they committed in the same run; a failure of that job blocks
// it, and a relationships audit of the job's own target adds no edge.
func TestOrderRelationshipsAudit(t *testing.T) {
	t.Parallel()
	orders := mk("a.duckdb", "a_orders", "raw_orders")
	orders.Audits = []job.Audit{
		{Kind: job.AuditRelationships, Column: "customer_id", To: "z_customers.customer_id"},
		{Kind: job.AuditRelationships, Column: "parent_id", To: "a_orders.order_id"},
		{Kind: job.AuditNotNull, Columns: []string{"order_id"}},
	}
	customers := mk("a.duckdb", "z_customers")
	p, err := New([]*job.Job{orders, mk("a.duckdb", "raw_orders"), customers})
	require.NoError(t, err)
	require.Equal(t, []string{"raw_orders", "z_customers", "a_orders"}, names(p.Jobs))
	require.Equal(t, []string{"z_customers"}, orders.AuditUpstream())
	require.Equal(t, []string{"z_customers"}, p.BlockedBy(orders, map[*job.Job]bool{customers: true}))
	require.Equal(t, []string{"a_orders"}, p.Downstream(customers))
}
