package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/report"
)

// TestPromoteDefinitionChanged: a model is edited, run --env dev builds
// it, diff --env dev reviews it, and then the job's files change again
// (the model's SQL, or its job file's [target] key) before promote.
// promote refuses (exit 3) naming the job and the part that changed, and
// production is left as it was; it used to commit the reviewed rows under
// the new definition's job key and model text, so that run and plan then
// saw nothing to do. diff --env says the files changed since the build. With the files as built, promote commits and plan
// says the job would be skipped.
func TestPromoteDefinitionChanged(t *testing.T) {
	t.Parallel()
	const (
		old      = "SELECT day, sum(amount) AS amount FROM {{upstream:src}} GROUP BY day\n"
		reviewed = "SELECT day, sum(amount) AS amount, count(*) AS n FROM {{upstream:src}} GROUP BY day\n"
	)
	cases := []struct {
		name string
		edit func(p *clitest.Project) // after the build
		want string
	}{
		{"model SQL", func(p *clitest.Project) {
			p.Write("models/daily.sql", "SELECT day, max(amount) AS amount, count(*) AS n FROM {{upstream:src}} GROUP BY day\n")
		}, "job daily changed since environment dev was built from it: model SQL " + "MODEL" + " (built from sha256 "},
		{"target key", func(p *clitest.Project) {
			b, err := os.ReadFile(p.Path("daily.toml"))
			require.NoError(t, err)
			p.Write("daily.toml", strings.Replace(string(b), `key = ["day"]`, `key = ["day", "n"]`, 1))
		}, "job daily changed since environment dev was built from it: config key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := clitest.NewProject(t)
			p.FileModel("daily", "p", []string{"src"}, []string{"day"}, old)
			require.Equal(t, 0, p.Idem("run", p.Dir).Code)
			p.Write("models/daily.sql", reviewed)
			r := p.Idem("run", p.Dir, "--env", "dev")
			require.Equal(t, 0, r.Code, r.Stderr)
			r = p.Idem("diff", p.Dir, "--env", "dev")
			require.Equal(t, 0, r.Code, r.Stderr)
			require.NotContains(t, r.Stdout, "edited")
			built, err := os.ReadFile(p.Path("daily.toml"))
			require.NoError(t, err)

			tc.edit(p)
			want := strings.Replace(tc.want, "MODEL", p.Path("models/daily.sql"), 1)
			part := want[strings.Index(want, "from it: ")+len("from it: "):]
			r = p.Idem("diff", p.Dir, "--env", "dev")
			require.Equal(t, 0, r.Code, r.Stderr)
			require.Contains(t, r.Stdout, "  edited       the job's files changed since the environment was built ("+part)
			db := p.DB("p")
			before := clitest.DumpState(t, db)
			r = p.Idem("promote", p.Dir, "--env", "dev")
			require.Equal(t, report.ExitRefused, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
			require.Contains(t, r.Stderr, want)
			require.Contains(t, r.Stderr, "nothing promoted: run --env dev again")
			require.Equal(t, before, clitest.DumpState(t, db), "a refused promote changed production")

			// The files as the environment was built from them: promoted.
			p.Write("models/daily.sql", reviewed)
			p.Write("daily.toml", string(built))
			r = p.Idem("promote", p.Dir, "--env", "dev")
			require.Equal(t, 0, r.Code, r.Stderr)
			require.Contains(t, r.Stdout, "daily: promoted: snapshot 2")
			r = p.Idem("plan", p.Path("daily.toml"), "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			var plan struct {
				Decision string `json:"decision"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &plan), r.Stdout)
			require.Equal(t, "skipped", plan.Decision, r.Stdout)
		})
	}
}
