package runner_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/idem-dev/idem/runner"
)

// ExampleProject_PlanEnvironment says what idem run --env NAME would do,
// as idem plan --env does: a model production never committed is built
// in the environment; the job it reads, unchanged, is read from
// production's committed snapshot, not copied. Nothing is written: no
// environment is there to list or drop.
func ExampleProject_PlanEnvironment() {
	ctx := context.Background()
	_, dir := applied(ctx)
	defer os.RemoveAll(dir)
	writeFiles(dir, map[string]string{
		"days.toml": `name = "days"
pipeline = "select"
transform_version = 1
database = "data/p.duckdb"

[input]
upstream = ["src"]

[transform]
sql = "models/days"

[target]
key = ["day"]
`,
		"models/days/v1.sql": "SELECT day, count(*) AS n FROM {{upstream:src}} GROUP BY day\n",
	})
	p, err := runner.Open(ctx, []string{dir})
	if err != nil {
		log.Fatal(err)
	}
	envs, err := p.PlanEnvironment(ctx, "review")
	if err != nil {
		log.Fatal(err)
	}
	for _, env := range envs {
		fmt.Println("environment", env.Name, "builds", len(env.Built()), "job(s)")
		for _, e := range env.Jobs {
			if e.Build {
				fmt.Printf("  build       %s (%s)\n", e.Job, e.Reason)
			} else {
				fmt.Printf("  production  %s snapshot %d\n", e.Job, e.Production)
			}
		}
	}
	files, err := p.Environments()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("environments built:", len(files))
	_, err = p.DropEnvironment("review")
	fmt.Println("drop:", err)
	// Output:
	// environment review builds 1 job(s)
	//   production  src snapshot 2
	//   build       days (production has no snapshot of it)
	// environments built: 0
	// drop: no environment review here
}
