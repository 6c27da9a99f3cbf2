package main

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The project case (issue 44): a dbt-style project of 20 jobs as a new user
// writes it with idem, against the same SQL run plainly in one DuckDB
// process. Six raw sources (merge_by_key: customers, orders and items fed by
// a monthly CSV drop in files mode, products, supplies and stores reference
// tables), six staging models and eight marts (project/*.sql, each one
// SELECT over {{upstream:NAME}}).

//go:embed project/*.sql
var projectModels embed.FS

// projSource is one raw source job.
type projSource struct {
	name    string
	path    string      // landing glob or file, relative to the project folder
	files   bool        // mode = "files" (a monthly drop), else mode = "replace"
	columns [][2]string // name, DuckDB type, in file order
	key     []string
	orderBy string
}

var projSources = []projSource{
	{"raw_customers", "raw/customers/*.csv", true, [][2]string{{"id", "BIGINT"}, {"name", "VARCHAR"}, {"updated_at", "BIGINT"}}, []string{"id"}, "updated_at"},
	{"raw_orders", "raw/orders/*.csv", true, [][2]string{{"id", "BIGINT"}, {"customer_id", "BIGINT"}, {"ordered_at", "TIMESTAMP"}, {"store_id", "INTEGER"},
		{"subtotal", "BIGINT"}, {"tax_paid", "BIGINT"}, {"order_total", "BIGINT"}, {"status", "VARCHAR"}, {"updated_at", "BIGINT"}}, []string{"id"}, "updated_at"},
	{"raw_items", "raw/items/*.csv", true, [][2]string{{"id", "BIGINT"}, {"order_id", "BIGINT"}, {"sku", "VARCHAR"}}, []string{"id"}, ""},
	{"raw_products", "raw/products.csv", false, [][2]string{{"sku", "VARCHAR"}, {"name", "VARCHAR"}, {"type", "VARCHAR"}, {"price", "BIGINT"}, {"description", "VARCHAR"}}, []string{"sku"}, ""},
	{"raw_supplies", "raw/supplies.csv", false, [][2]string{{"id", "INTEGER"}, {"name", "VARCHAR"}, {"cost", "BIGINT"}, {"perishable", "BOOLEAN"}, {"sku", "VARCHAR"}}, []string{"id", "sku"}, ""},
	{"raw_stores", "raw/stores.csv", false, [][2]string{{"id", "INTEGER"}, {"name", "VARCHAR"}, {"opened_at", "TIMESTAMP"}, {"tax_rate", "DECIMAL(5,4)"}}, []string{"id"}, ""},
}

// projModel is one model job: project/NAME.sql, keyed by key.
type projModel struct {
	name string
	key  []string
}

// projModelList is every model in an order that builds each after the
// jobs it reads (the floor's order; idem finds its own).
var projModelList = []projModel{
	{"stg_customers", []string{"customer_id"}},
	{"stg_orders", []string{"order_id"}},
	{"stg_order_items", []string{"order_item_id"}},
	{"stg_products", []string{"product_id"}},
	{"stg_supplies", []string{"supply_uuid"}},
	{"stg_locations", []string{"location_id"}},
	{"order_items", []string{"order_item_id"}},
	{"orders", []string{"order_id"}},
	{"customers", []string{"customer_id"}},
	{"customer_ranks", []string{"customer_id"}},
	{"monthly_revenue", []string{"month", "location_name"}},
	{"product_sales", []string{"product_id"}},
	{"customer_cohorts", []string{"cohort", "month"}},
	{"store_daily", []string{"location_id", "day"}},
}

var upstreamRef = regexp.MustCompile(`\{\{upstream:([a-z_]+)\}\}`)

// modelSQL is model name's SELECT and the jobs it reads, in order of first
// mention.
func modelSQL(name string) (string, []string, error) {
	b, err := projectModels.ReadFile("project/" + name + ".sql")
	if err != nil {
		return "", nil, err
	}
	var ups []string
	for _, m := range upstreamRef.FindAllStringSubmatch(string(b), -1) {
		if !slices.Contains(ups, m[1]) {
			ups = append(ups, m[1])
		}
	}
	return string(b), ups, nil
}

// tomlList is a TOML array of strings.
func tomlList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// writeProject writes the project's job files and model folders into dir
// (its database: dir/data/project.duckdb); batch, when not empty, is the
// files sources' [input] batch ("per_file", "all").
func writeProject(dir, batch string) error {
	files := map[string]string{}
	for _, s := range projSources {
		var b strings.Builder
		fmt.Fprintf(&b, "name = %q\npipeline = \"merge_by_key\"\ntransform_version = 1\nschema_version = 1\ndatabase = \"data/project.duckdb\"\ntags = [\"raw\"]\n\n[input]\npath = %q\n", s.name, s.path)
		if s.files {
			b.WriteString("mode = \"files\"\n")
			if batch != "" {
				fmt.Fprintf(&b, "batch = %q\n", batch)
			}
		} else {
			b.WriteString("mode = \"replace\"\n")
		}
		b.WriteString("\n[input.columns]\n")
		for _, c := range s.columns {
			fmt.Fprintf(&b, "%s = %q\n", c[0], c[1])
		}
		fmt.Fprintf(&b, "\n[target]\nkey = %s\n", tomlList(s.key))
		if s.orderBy != "" {
			fmt.Fprintf(&b, "order_by = %q\n", s.orderBy)
		}
		files[s.name+".toml"] = b.String()
	}
	for _, m := range projModelList {
		text, ups, err := modelSQL(m.name)
		if err != nil {
			return err
		}
		tag := "mart"
		if strings.HasPrefix(m.name, "stg_") {
			tag = "staging"
		}
		files[m.name+".toml"] = fmt.Sprintf("name = %q\npipeline = \"select\"\ntransform_version = 1\ndatabase = \"data/project.duckdb\"\ntags = [%q]\n\n[input]\nupstream = %s\n\n[transform]\nsql = \"models/%s\"\n\n[target]\nkey = %s\n",
			m.name, tag, tomlList(ups), m.name, tomlList(m.key))
		files[filepath.Join("models", m.name, "v1.sql")] = text
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := writeFile(path, text); err != nil {
			return err
		}
	}
	return nil
}
