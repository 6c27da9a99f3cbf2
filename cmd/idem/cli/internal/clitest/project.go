package clitest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Project is a project folder: job files, their models and inputs, and
// the databases they name under data/.
type Project struct {
	t   *testing.T
	Dir string
}

// Write writes text to the file at rel in the project, making its folder.
func (p *Project) Write(rel, text string) {
	p.t.Helper()
	WriteFile(p.t, filepath.Join(p.Dir, rel), text)
}

// Path is the absolute path of rel in the project.
func (p *Project) Path(rel string) string { return filepath.Join(p.Dir, rel) }

// DB is the path of database data/NAME.duckdb.
func (p *Project) DB(name string) string { return p.Path("data/" + name + ".duckdb") }

// Source writes job NAME.toml: merge_by_key of input, in database db.
func (p *Project) Source(name, db, input, columns, key string) {
	p.t.Helper()
	p.Write(name+".toml", fmt.Sprintf(`name = %q
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "data/%s.duckdb"

[input]
path = %q

[input.columns]
%s

[target]
key = [%q]
`+DuckdbSection, name, db, input, columns, key))
}

// Model writes job NAME.toml (pipeline = "select") in database db, reading
// upstream, with key key and table table ("" for the job's name), and its
// model models/NAME/v1.sql.
func (p *Project) Model(name, db string, upstream, key []string, table, sql string) {
	p.t.Helper()
	q := func(s []string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	target := ""
	if table != "" {
		target = fmt.Sprintf("table = %q\n", table)
	}
	p.Write(name+".toml", fmt.Sprintf(`name = %q
pipeline = "select"
transform_version = 1
database = "data/%s.duckdb"

[input]
upstream = %s

[transform]
sql = "models/%s"

[target]
%skey = %s
`+DuckdbSection, name, db, q(upstream), name, target, q(key)))
	p.Write("models/"+name+"/v1.sql", sql)
}

// FileModel writes job NAME.toml, a model written as one file
// (models/NAME.sql, versioned by its text) in database db, reading
// upstream, with key key, and the file.
func (p *Project) FileModel(name, db string, upstream, key []string, sql string) {
	p.t.Helper()
	q := func(s []string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	p.Write(name+".toml", fmt.Sprintf(`name = %q
pipeline = "select"
database = "data/%s.duckdb"
[input]
upstream = %s
[transform]
sql = "models/%s.sql"
[target]
key = %s
`+DuckdbSection, name, db, q(upstream), name, q(key)))
	p.Write("models/"+name+".sql", sql)
}

// NextModelVersion writes models/NAME/v2.sql and sets job NAME's
// transform_version to 2 (a model written with Model).
func (p *Project) NextModelVersion(name, sql string) {
	p.t.Helper()
	p.Write("models/"+name+"/v2.sql", sql)
	b, err := os.ReadFile(p.Path(name + ".toml"))
	require.NoError(p.t, err)
	p.Write(name+".toml", strings.Replace(string(b), "transform_version = 1", "transform_version = 2", 1))
}

// Idem runs the CLI in-process.
func (p *Project) Idem(args ...string) CLIResult {
	p.t.Helper()
	return CallIdem(p.t, args...)
}

// NewProject writes a project of two source jobs in database data/p.duckdb:
// src (sales by id: day, zone, amount) and zones (zone names), each
// merge_by_key from a CSV file of input/.
func NewProject(t *testing.T) *Project {
	t.Helper()
	p := &Project{t: t, Dir: t.TempDir()}
	p.Write("input/src.csv", "id,day,zone,amount\n1,2024-01-01,1,10.00\n2,2024-01-01,2,5.50\n3,2024-01-02,1,7.25\n")
	p.Write("input/zones.csv", "zone_id,zone\n1,north\n2,south\n")
	p.Source("src", "p", "input/src.csv", `id = "BIGINT"
day = "DATE"
zone = "INTEGER"
amount = "DECIMAL(10,2)"`, "id")
	p.Source("zones", "p", "input/zones.csv", `zone_id = "INTEGER"
zone = "VARCHAR"`, "zone_id")
	return p
}
