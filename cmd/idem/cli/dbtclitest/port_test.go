package dbtclitest

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" driver of the plain DuckDB the marts are compared with
	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// seed is a dbt seed ported as idem runs it today: a merge_by_key job over
// the CSV files of input/NAME/, one batch per file (a night's arrival).
func seed(name, columns, key string) string {
	return fmt.Sprintf(`name = %q
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "data/shop.duckdb"

[input]
path = "input/%s/*.csv"
mode = "files"

[input.columns]
%s

[target]
key = [%q]
`+clitest.DuckdbSection, name, name, columns, key)
}

// model is a model job file as a dbt port writes it: no [input] upstream
// (its upstreams are what its SQL reads), unless given; its SQL in
// models/NAME.sql.
func model(name, key, extra string) string {
	return fmt.Sprintf(`name = %q
pipeline = "select"
database = "data/shop.duckdb"

[transform]
sql = "models/%s.sql"

[target]
key = [%s]
`+clitest.DuckdbSection+extra, name, name, key)
}

// shopModels are the models of the port in dependency order, as the plain
// DuckDB run creates them, with their SQL as dbt users write it: ref(),
// import CTEs, macros from macros/, DuckDB's own date_trunc for the dbt
// package's.
var shopModels = []struct{ name, key, extra, sql string }{
	{"calendar", `"date_day"`, "", `-- A date spine: no upstream.
select cast(range as date) as date_day
from range(date '2024-01-01', date '2024-04-01', interval 1 day)
`},
	{"stg_customers", `"customer_id"`, "", `with source as (
    select * from {{ ref('raw_customers') }} where idem_status = 'active'
),
renamed as (
    select id as customer_id, first_name, last_name from source
)
select * from renamed
`},
	{"stg_orders", `"order_id"`, "", `with raw_orders as (
    select * from {{ ref('raw_orders') }} where idem_status = 'active'
)
select id as order_id, user_id as customer_id, order_date, status
from raw_orders
`},
	{"stg_payments", `"payment_id"`, "", `with raw_payments as (select * from {{ref("raw_payments")}} where idem_status = 'active')
select id as payment_id, order_id, payment_method,
    amount as amount_cents,
    cents_to_dollars(amount) as amount
from raw_payments
`},
	{"payments_by_order", `"order_id"`, "", `with stg_payments as (select * from {{ ref('stg_payments') }})
select order_id,
    cents_to_dollars(sum(amount_cents)) as amount,
    count(*) as payments
from stg_payments
group by order_id
`},
	{"customers", `"customer_id"`, "", `with customers as (select * from {{ ref('stg_customers') }}),
orders as (select * from {{ ref('stg_orders') }}),
payments as (select * from {{ ref('payments_by_order') }}),
customer_orders as (
    select customer_id, min(order_date) as first_order, max(order_date) as most_recent_order, count(*) as number_of_orders
    from orders group by customer_id
),
customer_payments as (
    select o.customer_id, sum(p.amount) as customer_lifetime_value
    from payments p join orders o using (order_id)
    group by o.customer_id
)
select c.customer_id, c.first_name, c.last_name,
    co.first_order, co.most_recent_order, coalesce(co.number_of_orders, 0) as number_of_orders,
    coalesce(cp.customer_lifetime_value, 0) as customer_lifetime_value
from customers c
left join customer_orders co using (customer_id)
left join customer_payments cp using (customer_id)
`},
	{"orders", `"order_id"`, `[input]
upstream = ["stg_orders", "stg_payments"]

[[audit]]
kind = "relationships"
column = "customer_id"
to = "customers.customer_id"
`, `with orders as (select * from {{ ref('stg_orders') }}),
stg_payments as (select * from {{ upstream:stg_payments }})
select o.order_id, generate_surrogate_key(o.order_id, o.customer_id) as order_key,
    o.customer_id, o.order_date, o.status,
    cents_to_dollars(sum(case when p.payment_method = 'credit_card' then p.amount_cents else 0 end)) as credit_card_amount,
    cents_to_dollars(coalesce(sum(p.amount_cents), 0)) as amount
from orders o
left join stg_payments p using (order_id)
group by all
`},
	{"revenue_by_month", `"month"`, "", `with months as (
    select distinct date_trunc('month', date_day) as month from {{ ref('calendar') }}
),
orders as (select * from {{ ref('orders') }})
select m.month, count(o.order_id) as orders, coalesce(sum(o.amount), 0) as revenue
from months m
left join orders o on date_trunc('month', o.order_date) = m.month
group by m.month
`},
}

var shopMacros = map[string]string{
	"cents_to_dollars.sql": `-- dbt: {% macro cents_to_dollars(column_name, scale=2) %}
create macro cents_to_dollars(column_name, scale := 2) as
    round(cast(column_name as decimal(18, 2)) / 100, scale);
`,
	"generate_surrogate_key.sql": `-- dbt_utils.generate_surrogate_key, for two fields
create macro generate_surrogate_key(a, b) as
    md5(coalesce(cast(a as varchar), '_dbt_utils_surrogate_key_null_') || '-' || coalesce(cast(b as varchar), '_dbt_utils_surrogate_key_null_'))
`,
}

// nights are the seeds' arrivals: night 1 the first load, night 2 new
// customers with their first orders (the audit's parents arrive with the
// children), night 3 an order shipped and another new customer.
var nights = []map[string]string{
	{
		"raw_customers": "id,first_name,last_name\n1,Michael,P.\n2,Shawn,M.\n3,Kathleen,P.\n",
		"raw_orders":    "id,user_id,order_date,status\n1,1,2024-01-01,returned\n2,3,2024-01-02,completed\n3,1,2024-02-04,placed\n",
		"raw_payments":  "id,order_id,payment_method,amount\n1,1,credit_card,1000\n2,2,credit_card,2000\n3,3,coupon,100\n4,3,bank_transfer,2550\n",
	},
	{
		"raw_customers": "id,first_name,last_name\n4,Jimmy,C.\n",
		"raw_orders":    "id,user_id,order_date,status\n4,4,2024-02-10,placed\n5,2,2024-02-11,placed\n",
		"raw_payments":  "id,order_id,payment_method,amount\n5,4,gift_card,1525\n6,5,credit_card,999\n",
	},
	{
		"raw_customers": "id,first_name,last_name\n5,Katherine,R.\n",
		"raw_orders":    "id,user_id,order_date,status\n3,1,2024-02-04,shipped\n6,5,2024-03-15,placed\n",
		"raw_payments":  "id,order_id,payment_method,amount\n7,6,credit_card,4200\n",
	},
}

var seedColumns = map[string][2]string{
	"raw_customers": {"id = \"BIGINT\"\nfirst_name = \"VARCHAR\"\nlast_name = \"VARCHAR\"", "id BIGINT, first_name VARCHAR, last_name VARCHAR"},
	"raw_orders":    {"id = \"BIGINT\"\nuser_id = \"BIGINT\"\norder_date = \"DATE\"\nstatus = \"VARCHAR\"", "id BIGINT, user_id BIGINT, order_date DATE, status VARCHAR"},
	"raw_payments":  {"id = \"BIGINT\"\norder_id = \"BIGINT\"\npayment_method = \"VARCHAR\"\namount = \"BIGINT\"", "id BIGINT, order_id BIGINT, payment_method VARCHAR, amount BIGINT"},
}

// TestPortDBTProject: a dbt-style project ported as dbt users write it
// (macros used from several models, import CTEs, dependencies only in
// the SQL, a calendar model, relationships audits across jobs, seeds, unit
// tests with omitted columns) runs on a fresh database and over several
// nightly arrivals, each night every mart equal to the same SQL run
// plainly in DuckDB; and under --env, the audit reads production's
// parents.
func TestPortDBTProject(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	for _, f := range []string{"src.toml", "zones.toml", "input/src.csv", "input/zones.csv"} {
		require.NoError(t, os.Remove(p.Path(f)))
	}
	for name, cols := range seedColumns {
		p.Write(name+".toml", seed(name, cols[0], "id"))
	}
	for file, text := range shopMacros {
		p.Write("macros/"+file, text)
	}
	for _, m := range shopModels {
		p.Write(m.name+".toml", model(m.name, m.key, m.extra))
		p.Write("models/"+m.name+".sql", m.sql)
	}
	db := p.DB("shop")
	plain := plainDuckDB(t)
	// lint reads the model as written: ref(), an import CTE and macros.
	r := p.Idem("lint", p.Path("orders.toml"))
	require.Equal(t, 0, r.Code, "%s%s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stdout, "0 error(s), 0 warning(s)")

	// Two nights in CI: a fresh database, then parents arriving with
	// their children; the third (an update) with IDEM_LONG=1.
	nightsRun := nights[:clitest.LongOr(2, len(nights))]
	for night, files := range nightsRun {
		for name, text := range files {
			p.Write(fmt.Sprintf("input/%s/%d.csv", name, night+1), text)
		}
		start := time.Now()
		r = p.Idem("run", p.Dir)
		t.Logf("night %d: %v", night+1, time.Since(start))
		require.Equal(t, 0, r.Code, "night %d: %s%s", night+1, r.Stdout, r.Stderr)
		if night == 0 {
			// The audit's to job runs first on a fresh database.
			require.Less(t, strings.Index(r.Stdout, "customers: loaded"), strings.Index(r.Stdout, "orders: loaded"), r.Stdout)
			require.Contains(t, r.Stdout, "calendar: loaded (first load)")
		}
		plainNight(t, plain, night)
		clitest.Inspect(t, db, func(conn *sql.Conn) {
			for _, m := range shopModels {
				want := plainRows(t, plain, m.name)
				require.NotEmpty(t, want, m.name)
				got, err := clitest.QueryStrings(t.Context(), conn, rowsQuery(m.name))
				require.NoError(t, err)
				require.Equal(t, want, got, "night %d: mart %s", night+1, m.name)
			}
			// Nothing of the macros outlives a run in the database, and
			// the calendar's lineage holds nothing invented.
			got, err := clitest.QueryStrings(t.Context(), conn, `SELECT function_name FROM duckdb_functions() WHERE function_name IN ('cents_to_dollars', 'generate_surrogate_key')`)
			require.NoError(t, err)
			require.Empty(t, got)
			got, err = clitest.QueryStrings(t.Context(), conn, `SELECT format('input ''{}'', upstream {}', parts::JSON->>'input', coalesce(parts::JSON->>'upstream', 'none')) FROM idem.jobs WHERE job = 'calendar'`)
			require.NoError(t, err)
			require.Equal(t, []string{"input '', upstream none"}, got)
		})
	}
	if clitest.LongTests() {
		// Nothing arrived: every job is skipped.
		r = p.Idem("run", p.Dir)
		require.Equal(t, 0, r.Code, r.Stderr)
		require.NotContains(t, r.Stdout, "loaded")
	}

	// A macro edit changes exactly the jobs that call it (and reruns their
	// downstreams): under --env, orders is built in the environment, its
	// relationships audit reading production's customers, which the
	// environment does not build.
	p.Write("macros/generate_surrogate_key.sql", strings.Replace(shopMacros["generate_surrogate_key.sql"], "'-'", "'~'", 1))
	start := time.Now()
	r = p.Idem("run", p.Dir, "--env", "dev")
	t.Logf("env: %v", time.Since(start))
	require.Equal(t, 0, r.Code, "%s%s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stdout, "orders: built in environment dev (transform changed)")
	require.Contains(t, r.Stdout, "revenue_by_month: built in environment dev (reads orders, built in the environment)")
	for _, j := range []string{"customers", "stg_payments", "payments_by_order", "calendar"} {
		require.Regexp(t, regexp.MustCompile(`(?m)^`+j+`: reads production's snapshot`), r.Stdout)
	}
	envDB := filepath.Join(db+".envs", "dev.duckdb")
	require.Equal(t, []int64{0}, clitest.QueryInts(t, envDB, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'customers'"), "customers is read from production")

	// Unit tests, as dbt's: omitted columns typed from the upstream's
	// committed schema.
	p.Write("tests/orders.toml", `[[test]]
name = "amounts in dollars"
model = "orders"
[test.given.stg_orders]
rows = [ { order_id = 1, customer_id = 7 } ]
[test.given.stg_payments]
rows = [
  { order_id = 1, payment_method = "credit_card", amount_cents = 1050 },
  { order_id = 1, payment_method = "coupon", amount_cents = 25 },
]
[test.expect]
columns = ["order_id", "customer_id", "credit_card_amount", "amount", "status"]
rows = [ { order_id = 1, customer_id = 7, credit_card_amount = "10.50", amount = "10.75" } ]

`)
	start = time.Now()
	r = p.Idem("test", p.Dir)
	t.Logf("test: %v", time.Since(start))
	require.Equal(t, 0, r.Code, "%s%s", r.Stdout, r.Stderr)
}

// rowsQuery lists a table's rows as text, one line each, in order.
func rowsQuery(table string) string {
	return `SELECT CAST(t AS VARCHAR) AS r FROM main."` + table + `" AS t ORDER BY r`
}

func plainDuckDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	for _, text := range shopMacros {
		_, err := db.Exec(text)
		require.NoError(t, err)
	}
	return db
}

// ref is {{ ref('x') }}, {{ref("x")}} or {{upstream:x}}.
var ref = regexp.MustCompile(`\{\{\s*(?:ref\(\s*['"]([a-z_]+)['"]\s*\)|upstream:([a-z_]+))\s*\}\}`)

// plainNight loads the seeds up to night (merge by key: the last file's
// row of each id) and runs every model's SQL as DuckDB reads it, the
// references made plain table names.
func plainNight(t *testing.T, db *sql.DB, night int) {
	t.Helper()
	for name, cols := range seedColumns {
		var selects []string
		for n := 0; n <= night; n++ {
			if text, ok := nights[n][name]; ok {
				body := strings.SplitN(text, "\n", 2)[1]
				for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
					selects = append(selects, fmt.Sprintf("SELECT %d AS night, * FROM (VALUES (%s)) AS v(%s)", n, quoteCSV(line), strings.Split(text, "\n")[0]))
				}
			}
		}
		q := fmt.Sprintf(`CREATE OR REPLACE TABLE %s AS SELECT * EXCLUDE (night, rn), 'active' AS idem_status FROM (
			SELECT * REPLACE (%s), row_number() OVER (PARTITION BY id ORDER BY night DESC) AS rn FROM (%s)) WHERE rn = 1`,
			name, casts(cols[1]), strings.Join(selects, " UNION ALL "))
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	for _, m := range shopModels {
		text := ref.ReplaceAllString(m.sql, "$1$2")
		_, err := db.Exec("CREATE OR REPLACE TABLE " + m.name + " AS " + text)
		require.NoError(t, err, m.name)
	}
}

// casts casts each column of a definition list ("id BIGINT, ...").
func casts(defs string) string {
	var out []string
	for _, d := range strings.Split(defs, ", ") {
		name, typ, _ := strings.Cut(d, " ")
		out = append(out, fmt.Sprintf("CAST(%s AS %s) AS %s", name, typ, name))
	}
	return strings.Join(out, ", ")
}

// quoteCSV makes a CSV line of plain fields a list of SQL strings.
func quoteCSV(line string) string {
	fields := strings.Split(line, ",")
	for i, f := range fields {
		fields[i] = "'" + strings.ReplaceAll(f, "'", "''") + "'"
	}
	return strings.Join(fields, ", ")
}

func plainRows(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	out, err := clitest.QueryStrings(t.Context(), db, rowsQuery(table))
	require.NoError(t, err)
	return out
}
