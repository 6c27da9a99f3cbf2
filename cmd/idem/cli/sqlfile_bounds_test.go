package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/report"
)

// TestSQLFileBound: a SQL file past jobfs.MaxSQLBytes (a one-file model, a
// model folder's version, a pipeline's step, its schema DDL; here 200 MB,
// sparse) is a usage error (exit 2) for run, plan and lint, naming the
// file, its size and the bound, given at once without reading it (a
// 200 MB model took 3.4 GB), and nothing is written.
func TestSQLFileBound(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	const size = 200 << 20
	cases := []struct {
		name string
		// write writes the job and returns the file to grow and the job
		// file.
		write func(p *clitest.Project) (string, string)
	}{
		{"one-file model", func(p *clitest.Project) (string, string) {
			p.FileModel("big", "p", []string{"src"}, []string{"day"}, "SELECT day, sum(amount) AS amount FROM {{upstream:src}} GROUP BY day\n")
			return p.Path("models/big.sql"), p.Path("big.toml")
		}},
		{"model folder", func(p *clitest.Project) (string, string) {
			p.Model("big", "p", []string{"src"}, []string{"day"}, "", "SELECT day, sum(amount) AS amount FROM {{upstream:src}} GROUP BY day\n")
			return p.Path("models/big/v1.sql"), p.Path("big.toml")
		}},
		{"pipeline step", func(p *clitest.Project) (string, string) {
			writePipelineJob(t, p, root)
			return p.Path("pipe/transform/v1/02_rank.sql"), p.Path("occ.toml")
		}},
		{"pipeline schema", func(p *clitest.Project) (string, string) {
			writePipelineJob(t, p, root)
			return p.Path("pipe/schema/v1.sql"), p.Path("occ.toml")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := clitest.NewProject(t)
			file, jobFile := tc.write(p)
			require.NoError(t, os.Truncate(file, size))
			for _, args := range [][]string{{"run", p.Dir}, {"plan", p.Dir}, {"run", jobFile}, {"lint", jobFile}} {
				start := time.Now()
				r := p.Idem(args...)
				require.Equal(t, report.ExitUsage, r.Code, "%v: stdout %s stderr %s", args, r.Stdout, r.Stderr)
				require.Contains(t, r.Stderr, filepath.Base(filepath.Dir(file))+"/"+filepath.Base(file)+": the file is 209715200 bytes, larger than 4194304 bytes (4 MiB), the most idem reads of a SQL file", "%v", args)
				require.Less(t, time.Since(start), 10*time.Second, "%v: refused before reading", args)
				require.NoFileExists(t, p.DB("p"), "%v wrote the database", args)
			}
		})
	}
}

// writePipelineJob writes job occ.toml in p running a copy of the built-in
// sample pipeline from folder pipe beside it.
func writePipelineJob(t *testing.T, p *clitest.Project, root string) {
	t.Helper()
	for _, f := range []string{"pipeline.toml", "schema/v1.sql", "transform/v1/01_stage.sql", "transform/v1/02_rank.sql", "transform/v1/03_outcomes.sql", "transform/v1/04_commit.sql"} {
		b, err := os.ReadFile(filepath.Join(root, "pipelines", "sample", f))
		require.NoError(t, err)
		p.Write("pipe/"+f, string(b))
	}
	p.Write("occ.toml", `name = "occ"
pipeline = "pipe"
transform_version = 1
schema_version = 1
database = "data/p.duckdb"
[input]
path = "`+filepath.Join(root, "fixtures", "sample", "occurrences-a.csv")+`"
[target]
table = "occ"
`+clitest.DuckdbSection)
}
