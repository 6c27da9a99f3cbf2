package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// The project case's raw data, in the shape of dbt's jaffle_shop: a CSV
// drop per month of new customers (and renamed ones), new orders (and last
// month's returns, sent again with a later updated_at) and their items,
// beside three reference files (products, supplies, stores). Every value
// comes from a PCG seeded by the month, so a month's files are the same
// bytes whatever else is generated.

// projectSeed seeds the generator; a month m draws from PCG(projectSeed, m).
const projectSeed = 44

// projStore is one store: it takes orders from the month it opened.
type projStore struct {
	id      int
	name    string
	opened  time.Time
	taxRate int // basis points
}

var projStores = []projStore{
	{1, "Philadelphia", time.Date(2016, 9, 1, 0, 0, 0, 0, time.UTC), 600},
	{2, "Brooklyn", time.Date(2017, 3, 12, 0, 0, 0, 0, time.UTC), 400},
	{3, "Chicago", time.Date(2018, 4, 29, 0, 0, 0, 0, time.UTC), 625},
	{4, "San Francisco", time.Date(2018, 6, 9, 0, 0, 0, 0, time.UTC), 750},
	{5, "New Orleans", time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC), 445},
	{6, "Los Angeles", time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC), 800},
}

// projProduct is one product; price in cents.
type projProduct struct {
	sku, name, kind string
	price           int64
}

var projProducts = []projProduct{
	{"JAF-001", "nutellaphone who dis", "jaffle", 1100},
	{"JAF-002", "doctor stew", "jaffle", 1100},
	{"JAF-003", "the krautback", "jaffle", 1200},
	{"JAF-004", "flame impala", "jaffle", 1400},
	{"JAF-005", "mel-bun", "jaffle", 1200},
	{"JAF-006", "tangaroo", "jaffle", 1300},
	{"BEV-001", "tangaroo juice", "beverage", 600},
	{"BEV-002", "chai and mighty", "beverage", 500},
	{"BEV-003", "vanilla ice", "beverage", 600},
	{"BEV-004", "for richer or pourover", "beverage", 700},
}

// projMonth is month m of the feed (1 = January 2025).
func projMonth(m int) time.Time {
	return time.Date(2025, time.Month(m), 1, 0, 0, 0, 0, time.UTC)
}

func projMonthName(m int) string { return projMonth(m).Format("2006-01") }

// projOrder is one order of the feed with its items' skus.
type projOrder struct {
	id, customer                  int64
	at                            time.Time
	store                         int
	subtotal, tax, total, updated int64
	status                        string
	skus                          []string
}

// projGen generates the feed for ordersPerMonth orders a month.
type projGen struct {
	ordersPerMonth int64
}

func (g projGen) customersPerMonth() int64 { return max(g.ordersPerMonth*3/10, 1) }

// orders are month m's new orders.
func (g projGen) orders(m int) []projOrder {
	rng := rand.New(rand.NewPCG(projectSeed, uint64(m)))
	start := projMonth(m)
	seconds := int64(projMonth(m+1).Sub(start) / time.Second)
	var open []projStore
	for _, s := range projStores {
		if !s.opened.After(start) {
			open = append(open, s)
		}
	}
	known := int64(m) * g.customersPerMonth()
	out := make([]projOrder, 0, g.ordersPerMonth)
	for i := range g.ordersPerMonth {
		u := rng.Float64()
		o := projOrder{
			id:       int64(m-1)*g.ordersPerMonth + i + 1,
			customer: 1 + int64(u*u*float64(known)), // older customers order more
			at:       start.Add(time.Duration(rng.Int64N(seconds)) * time.Second),
			status:   "completed",
			updated:  int64(m) * 1_000_000,
		}
		s := open[rng.IntN(len(open))]
		o.store = s.id
		for range 1 + rng.IntN(4) {
			p := projProducts[rng.IntN(len(projProducts))]
			o.skus = append(o.skus, p.sku)
			o.subtotal += p.price
		}
		o.tax = (o.subtotal*int64(s.taxRate) + 5000) / 10000
		o.total = o.subtotal + o.tax
		out = append(out, o)
	}
	return out
}

// writeMonth writes month m's three files under dir/raw/{customers,
// orders,items}/YYYY-MM.csv, unless they exist.
func (g projGen) writeMonth(dir string, m int) error {
	name := projMonthName(m) + ".csv"
	rng := rand.New(rand.NewPCG(projectSeed, 1000+uint64(m)))
	cpm := g.customersPerMonth()
	customers := func(w *bufio.Writer) {
		fmt.Fprintln(w, "id,name,updated_at")
		for i := range cpm {
			id := int64(m-1)*cpm + i + 1
			fmt.Fprintf(w, "%d,Customer %d,%d\n", id, id, int64(m)*1_000_000)
		}
		// 2% of earlier customers change their name.
		for j := range int64(m-1) * cpm / 50 {
			id := 1 + rng.Int64N(int64(m-1)*cpm)
			fmt.Fprintf(w, "%d,Customer %d (renamed in %s),%d\n", id, id, projMonthName(m), int64(m)*1_000_000+j+1)
		}
	}
	orders := g.orders(m)
	var returns []projOrder
	if m > 1 {
		// 3% of last month's orders come back as returned.
		for _, o := range g.orders(m - 1) {
			if rng.IntN(100) < 3 {
				o.status, o.updated = "returned", int64(m)*1_000_000+1
				returns = append(returns, o)
			}
		}
	}
	writeOrders := func(w *bufio.Writer) {
		fmt.Fprintln(w, "id,customer_id,ordered_at,store_id,subtotal,tax_paid,order_total,status,updated_at")
		for _, o := range append(orders, returns...) {
			fmt.Fprintf(w, "%d,%d,%s,%d,%d,%d,%d,%s,%d\n", o.id, o.customer, o.at.Format(time.DateTime), o.store, o.subtotal, o.tax, o.total, o.status, o.updated)
		}
	}
	items := func(w *bufio.Writer) {
		fmt.Fprintln(w, "id,order_id,sku")
		for _, o := range orders {
			for k, sku := range o.skus {
				fmt.Fprintf(w, "%d,%d,%s\n", o.id*10+int64(k), o.id, sku)
			}
		}
	}
	for _, f := range []struct {
		folder string
		write  func(*bufio.Writer)
	}{{"customers", customers}, {"orders", writeOrders}, {"items", items}} {
		if err := writeOnce(filepath.Join(dir, "raw", f.folder, name), f.write); err != nil {
			return err
		}
	}
	return nil
}

// writeReference writes the three reference files under dir/raw.
func writeReference(dir string) error {
	rng := rand.New(rand.NewPCG(projectSeed, 0))
	products := func(w *bufio.Writer) {
		fmt.Fprintln(w, "sku,name,type,price,description")
		for _, p := range projProducts {
			fmt.Fprintf(w, "%s,%s,%s,%d,the %s of the house\n", p.sku, p.name, p.kind, p.price, p.kind)
		}
	}
	supplies := func(w *bufio.Writer) {
		fmt.Fprintln(w, "id,name,cost,perishable,sku")
		costs := make([]int64, 20)
		for i := range costs {
			costs[i] = 5 + rng.Int64N(100)
		}
		for _, p := range projProducts {
			for _, id := range rng.Perm(len(costs))[:3+rng.IntN(3)] {
				fmt.Fprintf(w, "%d,supply %d,%d,%t,%s\n", id+1, id+1, costs[id], id%3 == 0, p.sku)
			}
		}
	}
	stores := func(w *bufio.Writer) {
		fmt.Fprintln(w, "id,name,opened_at,tax_rate")
		for _, s := range projStores {
			fmt.Fprintf(w, "%d,%s,%s,%d.%04d\n", s.id, s.name, s.opened.Format(time.DateTime), s.taxRate/10000, s.taxRate%10000)
		}
	}
	for _, f := range []struct {
		name  string
		write func(*bufio.Writer)
	}{{"products.csv", products}, {"supplies.csv", supplies}, {"stores.csv", stores}} {
		if err := writeOnce(filepath.Join(dir, "raw", f.name), f.write); err != nil {
			return err
		}
	}
	return nil
}

// writeCSV writes path through write, unless it exists (its bytes depend
// only on the generator's parameters, which name the work folder).
func writeOnce(path string, write func(*bufio.Writer)) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	write(w)
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
