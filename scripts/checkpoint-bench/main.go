// Command checkpoint-bench measures [retention] checkpoint_every side by
// side in one run: a versioned_changes job loads ENTITIES entities, then
// applies BATCHES-1 batches of CHANGES changes, into two databases, one with
// checkpoint_every = EVERY and one without (the runs alternate, batch by
// batch, so load hits both alike). It prints the run time of the
// checkpointed snapshots against the same batches without checkpoints, the
// checkpoint bytes, and the rerun time of the latest snapshot (and of
// latest-EVERY/2) from its checkpoint against the full replay
// (rerun --from-start). Not run in CI.
//
//	go run ./scripts/checkpoint-bench -entities 500000 -changes 100000 -batches 30 -every 5
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/pipelines"
)

func main() {
	entities := flag.Int64("entities", 500_000, "entities loaded by the first batch (the target's rows)")
	changes := flag.Int64("changes", 100_000, "changes per later batch")
	batches := flag.Int("batches", 30, "batches in all, the first included")
	every := flag.Int("every", 5, "checkpoint_every")
	dir := flag.String("dir", "", "work folder (default: a new temp folder)")
	only := flag.String("measure", "", "only time WriteCheckpoint on the database of this job file (3 times, rolled back), e.g. DIR/none.toml after a run")
	bin := flag.String("idem", "", "idem binary (default: go build ./cmd/idem into the work folder)")
	flag.Parse()
	if *only != "" {
		if err := measureCheckpoint(context.Background(), *only); err != nil {
			fmt.Fprintln(os.Stderr, "checkpoint-bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := bench(context.Background(), *entities, *changes, *batches, *every, *dir, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "checkpoint-bench:", err)
		os.Exit(1)
	}
}

func bench(ctx context.Context, entities, changes int64, batches, every int, dir, bin string) error {
	var err error
	if dir == "" {
		if dir, err = os.MkdirTemp("", "idem-checkpoint-bench-*"); err != nil {
			return err
		}
	}
	if bin == "" {
		bin = filepath.Join(dir, "idem")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/idem").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
	}
	if err := generate(ctx, dir, entities, changes, batches); err != nil {
		return err
	}
	jobs := map[string]string{}
	for _, name := range []string{"ckpt", "none"} {
		ret := ""
		if name == "ckpt" {
			ret = fmt.Sprintf("\n[retention]\ncheckpoint_every = %d\n", every)
		}
		jobs[name] = filepath.Join(dir, name+".toml")
		toml := fmt.Sprintf("name = \"cs\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\ndatabase = %q\n\n[input]\npath = %q\nformat = \"parquet\"\n\n[target]\ntable = \"cs\"\n%s",
			filepath.Join(dir, name+".duckdb"), filepath.Join(dir, "b1.parquet"), ret)
		if err := os.WriteFile(jobs[name], []byte(toml), 0o644); err != nil {
			return err
		}
	}
	took := map[string][]time.Duration{}
	for b := 1; b <= batches; b++ {
		for _, name := range []string{"ckpt", "none"} {
			start := time.Now()
			if out, err := exec.CommandContext(ctx, bin, "run", jobs[name], "--input", filepath.Join(dir, fmt.Sprintf("b%d.parquet", b)), "--quiet").CombinedOutput(); err != nil {
				return fmt.Errorf("run %s batch %d: %v: %s", name, b, err, out)
			}
			took[name] = append(took[name], time.Since(start))
		}
		fmt.Printf("batch %2d: %.2fs with checkpoint_every, %.2fs without\n", b, took["ckpt"][b-1].Seconds(), took["none"][b-1].Seconds())
	}
	var withC, withoutC, others, othersNone []float64
	for i := range batches {
		s := i + 1
		if s%every == 0 {
			withC = append(withC, took["ckpt"][i].Seconds())
			withoutC = append(withoutC, took["none"][i].Seconds())
		} else if s > 1 {
			others = append(others, took["ckpt"][i].Seconds())
			othersNone = append(othersNone, took["none"][i].Seconds())
		}
	}
	fmt.Printf("checkpoint-bench: %d entities, %d batches of %d changes, checkpoint_every = %d (%s)\n", entities, batches-1, changes, every, dir)
	fmt.Printf("run time of the checkpointed snapshots:   median %.2fs with checkpoint, %.2fs the same batches without (other batches: %.2fs vs %.2fs)\n",
		median(withC), median(withoutC), median(others), median(othersNone))
	if err := checkpointBytes(ctx, filepath.Join(dir, "ckpt.duckdb")); err != nil {
		return err
	}
	fmt.Printf("database + retained inputs: %s with checkpoints, %s without\n",
		human(dirBytes(dir, "ckpt.duckdb")), human(dirBytes(dir, "none.duckdb")))
	latest := int64(batches)
	for _, r := range []struct {
		s    int64
		args []string
	}{{latest, nil}, {latest - int64(every)/2, nil}, {latest, []string{"--from-start"}}} {
		s, args := r.s, r.args
		{
			start := time.Now()
			cmd := exec.CommandContext(ctx, bin, append([]string{"rerun", jobs["ckpt"], "--snapshot", fmt.Sprint(s), "--json", "--quiet"}, args...)...)
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("rerun %d %v: %v: %s", s, args, err, out)
			}
			var res struct {
				Reproduced     bool  `json:"reproduced"`
				Replayed       int   `json:"replayed"`
				FromCheckpoint int64 `json:"from_checkpoint"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				return err
			}
			how := fmt.Sprintf("from checkpoint %d", res.FromCheckpoint)
			if res.FromCheckpoint == 0 {
				how = "from the start"
			}
			fmt.Printf("rerun --snapshot %d %-20s %7.2fs  replayed %2d  reproduced %v\n", s, how, time.Since(start).Seconds(), res.Replayed, res.Reproduced)
		}
	}
	return nil
}

// generate writes b1.parquet (one upsert per entity) and b2..bN.parquet
// (changes on random entities, later versions, 5% deletes, some stale).
func generate(ctx context.Context, dir string, entities, changes int64, batches int) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	first := fmt.Sprintf(`COPY (SELECT 'c1-' || i AS change_id, 'e' || i AS entity_id, CAST(1 AS BIGINT) AS source_version,
		'upsert' AS operation, 'v' || (i %% 97) AS value FROM range(%d) t(i)) TO '%s' (FORMAT parquet)`, entities, filepath.Join(dir, "b1.parquet"))
	if _, err := db.ExecContext(ctx, first); err != nil {
		return err
	}
	for b := 2; b <= batches; b++ {
		q := fmt.Sprintf(`COPY (SELECT 'c%[1]d-' || i AS change_id, 'e' || (hash(%[1]d, i) %% %[2]d) AS entity_id,
			CAST(%[1]d * 1000 + (hash(i, %[1]d) %% 1500) AS BIGINT) AS source_version,
			CASE WHEN i %% 20 = 0 THEN 'delete' ELSE 'upsert' END AS operation,
			'v' || (hash(i) %% 89) AS value FROM range(%[3]d) t(i)) TO '%[4]s' (FORMAT parquet)`,
			b, entities, changes, filepath.Join(dir, fmt.Sprintf("b%d.parquet", b)))
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

func checkpointBytes(ctx context.Context, path string) error {
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT snapshot, bytes, files FROM idem.checkpoints ORDER BY snapshot`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s, n int64
		var files string
		if err := rows.Scan(&s, &n, &files); err != nil {
			return err
		}
		var fs []struct {
			Part  string `json:"part"`
			Bytes int64  `json:"bytes"`
		}
		_ = json.Unmarshal([]byte(files), &fs)
		target := int64(0)
		for _, f := range fs {
			if f.Part == "target" {
				target = f.Bytes
			}
		}
		fmt.Printf("checkpoint %2d: %s (target %s)\n", s, human(n), human(target))
	}
	return rows.Err()
}

func dirBytes(dir, db string) int64 {
	var n int64
	for _, p := range []string{db, db + ".wal", db + ".inputs"} {
		_ = filepath.Walk(filepath.Join(dir, p), func(_ string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				n += info.Size()
			}
			return nil
		})
	}
	return n
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// measureCheckpoint times run.WriteCheckpoint alone on the job's database
// as it stands (its latest snapshot), in a transaction rolled back each
// time: the cost a checkpoint adds to a run.
func measureCheckpoint(ctx context.Context, jobFile string) error {
	j, err := run.LoadJob(jobFile, pipelines.FS)
	if err != nil {
		return err
	}
	j.Retention.CheckpointEvery = 1
	d, err := run.Open(ctx, j.Database, run.OpenOptions{})
	if err != nil {
		return err
	}
	defer d.Close()
	for rep := range 3 {
		conn, tx, err := d.BeginPinned(ctx)
		if err != nil {
			return err
		}
		st, err := catalog.ReadState(ctx, tx, j.Name)
		if err != nil {
			return err
		}
		start := time.Now()
		c, err := run.WriteCheckpoint(ctx, d, tx, j, st.Snapshot, nil)
		took := time.Since(start)
		_ = tx.Rollback()
		conn.Close()
		if err != nil {
			return err
		}
		rows, _ := catalog.CountRows(ctx, d.SQL(), j.Table)
		fmt.Printf("checkpoint of snapshot %d (%d target rows): %.2fs, %s in %d files (rep %d)\n", st.Snapshot, rows, took.Seconds(), human(c.Bytes), len(c.Files)+1, rep+1)
	}
	return nil
}
