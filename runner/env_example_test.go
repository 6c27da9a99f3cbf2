package runner_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/runner"
)

// ExampleProject_PlanEnvironment says what idem run --env NAME would do,
// as idem plan --env does: a model production never committed is built
// in the environment; the job it reads, unchanged, is read from
// production's committed snapshot, not copied. Nothing is written: no
// environment is there to list or drop.
func ExampleProject_PlanEnvironment() {
	ctx := context.Background()
	dir := withDays(ctx)
	defer os.RemoveAll(dir)
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

// ExampleProject_RunEnvironment builds an environment as idem run --env
// does: the model production never committed runs in
// <db>.envs/review.duckdb, reading the job it reads from production's
// committed snapshot, which is neither run nor copied; production is
// only read. What was built is recorded for DiffEnvironment and Promote.
func ExampleProject_RunEnvironment() {
	ctx := context.Background()
	dir := withDays(ctx)
	defer os.RemoveAll(dir)
	p, err := runner.Open(ctx, []string{dir}, runner.WithoutSHA256())
	if err != nil {
		log.Fatal(err)
	}
	envs, err := p.RunEnvironment(ctx, "review", func(e *runner.EnvJob, r *runner.Result, err error) {
		if !e.Build {
			fmt.Printf("%s: read from production's snapshot %d\n", e.Job, e.Production)
			return
		}
		fmt.Printf("%s: built (%s): %s snapshot %d, %d rows, err %v\n", e.Job, e.Reason, r.Decision, r.Snapshot, r.RowsOut, err)
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, env := range envs {
		fmt.Printf("environment %s: complete %v, %d job(s) built, %s\n", env.Name, env.Complete, len(env.Built()),
			filepath.Base(runner.EnvPath(env.Database, env.Name)))
	}
	runs, err := p.Log(ctx, "days")
	fmt.Println("production's runs of days:", len(runs), err)
	// Output:
	// src: read from production's snapshot 2
	// days: built (production has no snapshot of it): loaded snapshot 1, 3 rows, err <nil>
	// environment review: complete true, 1 job(s) built, review.duckdb
	// production's runs of days: 0 <nil>
}

// withDays is applied's folder with daysJob beside src, counting its ids
// per day: a model production never committed.
func withDays(ctx context.Context) string {
	_, dir := applied(ctx)
	writeFiles(dir, map[string]string{
		"days.toml":          daysJob,
		"models/days/v1.sql": "SELECT day, count(*) AS n FROM {{upstream:src}} GROUP BY day\n",
	})
	return dir
}

// daysJob is a model over sourceJob's src, in its database, reading
// models/days/v1.sql.
const daysJob = `name = "days"
pipeline = "select"
transform_version = 1
database = "data/p.duckdb"

[input]
upstream = ["src"]

[transform]
sql = "models/days"

[target]
key = ["day"]
`
