package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/idem-dev/idem/publish/iceberg/publisher"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	"github.com/twmb/avro/ocf"
)

// The binaries under test, built once: idem-iceberg from this folder and
// the core idem, which must warn and not publish.
var idemIceberg, idemCore string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idem-iceberg-bin-")
	if err != nil {
		panic(err)
	}
	idemIceberg, idemCore = filepath.Join(dir, "idem-iceberg"), filepath.Join(dir, "idem")
	for _, b := range []struct{ out, pkg, wd string }{{idemIceberg, ".", "."}, {idemCore, "./cmd/idem", "../../../.."}} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir, cmd.Stderr = b.wd, os.Stderr
		if err := cmd.Run(); err != nil {
			panic(fmt.Sprintf("build %s: %v", b.pkg, err))
		}
	}
	code := m.Run()
	s3srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is a finished process.
type result struct {
	code           int
	stdout, stderr string
}

// project is a folder of job files with one database, publishing to a
// catalog and a warehouse.
type project struct {
	t                  *testing.T
	dir, catalog, lake string
	env                []string
}

func newProject(t *testing.T, catalog string) *project {
	dir := t.TempDir()
	p := &project{t: t, dir: dir, lake: filepath.Join(dir, "lake")}
	if catalog == "" {
		catalog = filepath.Join(dir, "catalog.db")
	}
	p.catalog = catalog
	repo, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	require.NoError(t, os.CopyFS(filepath.Join(dir, "changes"), os.DirFS(filepath.Join(repo, "fixtures/changes"))))
	// A partitioned refresh pipeline: the built-in sample, plus a version 3
	// that adds a column (decade).
	pipe := filepath.Join(dir, "pipe")
	require.NoError(t, os.CopyFS(pipe, os.DirFS(filepath.Join(repo, "pipelines/sample"))))
	v1, err := os.ReadFile(filepath.Join(pipe, "schema/v1.sql"))
	require.NoError(t, err)
	p.write("pipe/schema/v3.sql", strings.Replace(string(v1), "    license    VARCHAR NOT NULL\n", "    license    VARCHAR NOT NULL,\n    decade     INTEGER\n", 1))
	require.NoError(t, os.CopyFS(filepath.Join(pipe, "transform/v3"), os.DirFS(filepath.Join(pipe, "transform/v1"))))
	commit, err := os.ReadFile(filepath.Join(pipe, "transform/v3/04_commit.sql"))
	require.NoError(t, err)
	p.write("pipe/transform/v3/04_commit.sql", strings.Replace(string(commit),
		"INSERT INTO {{table}} (id, species_id, year, license)\nSELECT id, species_id, year, license\n",
		"INSERT INTO {{table}} (id, species_id, year, license, decade)\nSELECT id, species_id, year, license, year // 10\n", 1))
	var rows []string
	for y := 45; y <= 48; y++ {
		for i := range 3 {
			rows = append(rows, fmt.Sprintf("%d,1,%d,CC0 1.0", y*10+i, y))
		}
	}
	p.write("occ.csv", "id,species_id,year,license\n"+strings.Join(rows, "\n")+"\n")
	p.job("accounts.toml", `name = "accounts"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
[input]
path = "changes/batch-1.jsonl"
[retention]
keep_snapshots = 3
`)
	p.job("occ.toml", `name = "occ"
pipeline = "pipe"
transform_version = 1
schema_version = 1
[input]
path = "occ.csv"
[target]
partition_by = "year"
`)
	return p
}

func (p *project) write(name, text string) {
	require.NoError(p.t, os.MkdirAll(filepath.Dir(filepath.Join(p.dir, name)), 0o755))
	require.NoError(p.t, os.WriteFile(filepath.Join(p.dir, name), []byte(text), 0o644))
}

// job writes a job file with the project's database and [publish.iceberg].
func (p *project) job(name, text string) {
	p.write(name, text+fmt.Sprintf(`database = "idem.duckdb"
[duckdb]
threads = 1
[publish.iceberg]
catalog = %q
warehouse = %q
namespace = "analytics"
`, p.catalog, "file://"+p.lake))
	// database must be a top-level key: move it above the first table.
	b, err := os.ReadFile(filepath.Join(p.dir, name))
	require.NoError(p.t, err)
	s := strings.Replace(string(b), "database = \"idem.duckdb\"\n", "", 1)
	s = strings.Replace(s, "\n[input]", "\ndatabase = \"idem.duckdb\"\n[input]", 1)
	require.NoError(p.t, os.WriteFile(filepath.Join(p.dir, name), []byte(s), 0o644))
}

// run runs a binary in the project's folder.
func (p *project) run(bin string, args ...string) result {
	p.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = p.dir, append(os.Environ(), p.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(p.t, ok, "run %s: %v", args, err)
		code = ee.ExitCode()
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (p *project) ok(bin string, args ...string) string {
	p.t.Helper()
	r := p.run(bin, args...)
	require.Equal(p.t, 0, r.code, "%s %v\nstdout: %s\nstderr: %s", filepath.Base(bin), args, r.stdout, r.stderr)
	return r.stdout
}

func (p *project) publish(jobFile string) publisher.Report {
	p.t.Helper()
	var rep publisher.Report
	out := p.ok(idemIceberg, "publish", jobFile, "--json")
	require.NoError(p.t, json.Unmarshal([]byte(out), &rep), out)
	return rep
}

// verify checks, from a fresh process, that every kept idem snapshot of
// the job equals its Iceberg snapshot, and returns the snapshots verified.
func (p *project) verify(jobFile string) []int64 {
	p.t.Helper()
	var rep publisher.VerifyReport
	out := p.ok(idemIceberg, "publish", jobFile, "--verify", "--json")
	require.NoError(p.t, json.Unmarshal([]byte(out), &rep), out)
	var s []int64
	for _, v := range rep.Verified {
		s = append(s, v.Snapshot)
	}
	return s
}

// lakeHolds lists the warehouse files that hold needle: Parquet files
// read row by row (their pages are compressed), Avro manifests decoded
// (deflated), other files (metadata JSON) as bytes.
func (p *project) lakeHolds(needle string) []string {
	duck, err := sql.Open("duckdb", "")
	require.NoError(p.t, err)
	defer duck.Close()
	var found []string
	require.NoError(p.t, filepath.WalkDir(p.lake, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var text []byte
		switch filepath.Ext(path) {
		case ".parquet":
			rows, err := duck.Query("SELECT * FROM read_parquet('" + strings.ReplaceAll(path, "'", "''") + "')")
			if err != nil {
				return err
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					rows.Close()
					return err
				}
				text = fmt.Appendf(text, "%s|", flatten(vals))
			}
			rows.Close()
		case ".avro":
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			rd, err := ocf.NewReader(f)
			if err != nil {
				return err
			}
			for {
				var v any
				if err := rd.Decode(&v); err == io.EOF {
					break
				} else if err != nil {
					return err
				}
				text = fmt.Appendf(text, "%s|", flatten(v))
			}
		default:
			if text, err = os.ReadFile(path); err != nil {
				return err
			}
		}
		if bytes.Contains(text, []byte(needle)) {
			found = append(found, path)
		}
		return nil
	}))
	return found
}

// flatten writes every string and byte string a decoded value holds.
func flatten(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x + "|")
		case []byte:
			b.Write(x)
			b.WriteString("|")
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				b.WriteString(k + "|")
				walk(e)
			}
		default:
			fmt.Fprintf(&b, "%v|", x)
		}
	}
	walk(v)
	return b.String()
}

// catalogs are the SQL catalogs every test runs against: SQLite, and a
// throwaway PostgreSQL cluster.
func catalogs(t *testing.T) map[string]string {
	return map[string]string{"sqlite": "", "postgres": startPostgres(t)}
}

// TestPublishTenSnapshots publishes two jobs through ten snapshots: change
// batches with deletes, an erasure and expiry (accounts, published after
// each COMMIT by idem-iceberg run), and a partitioned refresh with a
// partition replaced and a column added (occ, run by the core idem, which
// warns, and caught up by idem-iceberg publish). Every kept snapshot reads
// back equal from a fresh process; the erased subject is in no file of
// the warehouse; the expired snapshots are gone from Iceberg.
func TestPublishTenSnapshots(t *testing.T) {
	for name, cat := range catalogs(t) {
		t.Run(name, func(t *testing.T) {
			p := newProject(t, cat)
			// accounts: 1-4 batches (batch 3 and 4 delete), 5 the erasure,
			// 6 a replay; keep_snapshots = 3 expires 1-3.
			for _, b := range []string{"batch-1", "batch-2", "batch-3", "batch-4"} {
				out := p.ok(idemIceberg, "run", "accounts.toml", "--input", "changes/"+b+".jsonl")
				require.Contains(t, out, "iceberg   analytics.accounts: published snapshot")
			}
			require.NotEmpty(t, p.lakeHolds("account-2"), "the subject is published before its erasure")
			out := p.ok(idemIceberg, "erase", "accounts.toml", "--key", "account-2")
			require.Contains(t, out, "again without the erased rows")
			p.ok(idemIceberg, "run", "accounts.toml", "--input", "changes/batch-1-replayed.jsonl")
			require.Equal(t, []int64{4, 5, 6}, p.verify("accounts.toml"))
			require.Empty(t, p.lakeHolds("account-2"), "the erased subject's bytes outlive the erasure")

			// occ: 1 load, 2 partition 46 replaced, 3 a column added, 4
			// partition 47 replaced.
			r := p.run(idemCore, "run", "occ.toml")
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stderr, "the snapshot was not published to Iceberg; run idem-iceberg publish occ.toml")
			rep := p.publish("occ.toml")
			require.Len(t, rep.Published, 1)
			p.write("occ46.csv", "id,species_id,year,license\n460,1,46,CC0 1.0\n469,2,46,CC BY 4.0\n")
			p.ok(idemCore, "run", "occ.toml", "--input", "occ46.csv", "--partitions", "46")
			rep = p.publish("occ.toml")
			require.Len(t, rep.Published, 1)
			require.Equal(t, []string{"46"}, rep.Published[0].Partitions, "only the replaced partition is rewritten")
			require.Equal(t, 1, rep.Published[0].Removed)
			p.ok(idemCore, "run", "occ.toml", "--input", "occ.csv") // back to the whole input
			b, err := os.ReadFile(filepath.Join(p.dir, "occ.toml"))
			require.NoError(t, err)
			p.write("occ.toml", strings.NewReplacer("transform_version = 1", "transform_version = 3", "schema_version = 1", "schema_version = 3").Replace(string(b)))
			p.ok(idemCore, "run", "occ.toml")
			p.write("occ47.csv", "id,species_id,year,license\n470,1,47,CC0 1.0\n")
			p.ok(idemCore, "run", "occ.toml", "--input", "occ47.csv", "--partitions", "47")
			rep = p.publish("occ.toml")
			require.Len(t, rep.Published, 3)
			require.Equal(t, []string{"46"}, rep.Published[0].Partitions, "the whole input again changes partition 46 back")
			require.Equal(t, []string{"45", "46", "47", "48"}, rep.Published[1].Partitions, "a column added changes every partition")
			require.Equal(t, []string{"47"}, rep.Published[2].Partitions)
			require.Equal(t, []int64{1, 2, 3, 4, 5}, p.verify("occ.toml"))
			require.Empty(t, p.publish("occ.toml").Published, "a second catch-up publishes nothing")
		})
	}
}

// TestPublishKilled kills the publisher at every fault point and at random
// moments; the catch-up after each leaves exactly one Iceberg snapshot per
// kept idem snapshot, each equal to it.
func TestPublishKilled(t *testing.T) {
	p := newProject(t, startPostgres(t))
	batches := []string{"batch-1", "batch-2", "batch-3", "batch-4", "batch-1-replayed"}
	points := []string{publisher.FaultAfterFiles, publisher.FaultBeforeCommit, publisher.FaultAfterCommit, publisher.FaultAfterExpire}
	for i, b := range batches {
		p.ok(idemCore, "run", "accounts.toml", "--input", "changes/"+b+".jsonl")
		if i == 3 {
			// The core idem refuses to erase a publishing job: idem-iceberg
			// erases, killed before the commit of the table rebuilt
			// without the subject.
			p.env = []string{"IDEM_FAULT=" + publisher.FaultBeforeCommit}
			r := p.run(idemIceberg, "erase", "accounts.toml", "--key", "account-2")
			p.env = nil
			require.Equal(t, -1, r.code, "%s %s", r.stdout, r.stderr)
		}
		if i < len(points) {
			p.env = []string{"IDEM_FAULT=" + points[i]}
			r := p.run(idemIceberg, "publish", "accounts.toml")
			p.env = nil
			require.Equal(t, -1, r.code, "IDEM_FAULT=%s: %s %s", points[i], r.stdout, r.stderr)
			require.Contains(t, r.stderr, "killing the process at "+points[i])
		} else {
			// A random moment: SIGKILL after 0-400ms.
			cmd := exec.Command(idemIceberg, "publish", "accounts.toml")
			cmd.Dir = p.dir
			require.NoError(t, cmd.Start())
			time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		p.publish("accounts.toml")
		kept := p.verify("accounts.toml") // fails on a duplicate, a missing or an expired snapshot
		require.NotEmpty(t, kept)
	}
	require.Empty(t, p.lakeHolds("account-2"))
}

// TestTwoPublishers starts two publishers of one table at once, both held
// before their commit: the first released publishes, the second is
// refused (exit 3), and the table holds each snapshot once.
func TestTwoPublishers(t *testing.T) {
	for name, cat := range catalogs(t) {
		t.Run(name, func(t *testing.T) {
			p := newProject(t, cat)
			p.ok(idemCore, "run", "accounts.toml")
			p.publish("accounts.toml") // the table exists; both race for snapshot 2
			p.ok(idemCore, "run", "accounts.toml", "--input", "changes/batch-2.jsonl")
			type held struct {
				cmd    *exec.Cmd
				stdin  io.WriteCloser
				stderr *bytes.Buffer
			}
			start := func() held {
				cmd := exec.Command(idemIceberg, "publish", "accounts.toml")
				cmd.Dir, cmd.Env = p.dir, append(os.Environ(), "IDEM_FAULT=block:"+publisher.FaultBeforeCommit)
				stdin, err := cmd.StdinPipe()
				require.NoError(t, err)
				pr, pw := io.Pipe()
				var errb bytes.Buffer
				cmd.Stderr = io.MultiWriter(pw, &errb)
				require.NoError(t, cmd.Start())
				sc := bufio.NewScanner(pr)
				for sc.Scan() {
					if strings.Contains(sc.Text(), "blocked at "+publisher.FaultBeforeCommit) {
						break
					}
				}
				go io.Copy(io.Discard, pr)
				return held{cmd, stdin, &errb}
			}
			a, b := start(), start()
			require.NoError(t, a.stdin.Close())
			require.NoError(t, a.cmd.Wait(), a.stderr.String())
			require.NoError(t, b.stdin.Close())
			err := b.cmd.Wait()
			require.Error(t, err)
			require.Equal(t, 3, b.cmd.ProcessState.ExitCode(), b.stderr.String())
			require.Contains(t, b.stderr.String(), "another publisher committed first")
			require.Equal(t, []int64{1, 2}, p.verify("accounts.toml"))
		})
	}
}

// TestBadPublishSection names the file, line and key (exit 2) in the core
// binary.
func TestBadPublishSection(t *testing.T) {
	t.Parallel()
	p := &project{t: t, dir: t.TempDir()}
	for _, tc := range []struct{ body, want string }{
		{"catalog = \"s3://x\"\nwarehouse = \"lake\"\nnamespace = \"a\"\n", `:9: publish.iceberg.catalog: want a postgres:// URL, a SQLite file (path or sqlite:// URL) or an http(s):// Iceberg REST catalog`},
		{"catalog = \"c.db\"\nwarehouse = \"gs://bucket\"\nnamespace = \"a\"\n", `:10: publish.iceberg.warehouse: want a local folder (a path or file:// URL) or an s3://BUCKET/PREFIX object store`},
		{"catalog = \"c.db\"\nwarehouse = \"s3://\"\nnamespace = \"a\"\n", `:10: publish.iceberg.warehouse: want s3://BUCKET or s3://BUCKET/PREFIX`},
		{"catalog = \"c.db\"\nwarehouse = \"lake\"\n", `:8: publish.iceberg.namespace: missing`},
		{"catalog = \"c.db\"\nwarehouse = \"lake\"\nnamespace = \"a\"\nbucket = 1\n", `:12: publish.iceberg.bucket: unknown key`},
	} {
		p.write("bad.toml", "name = \"t\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\npath = \"x.jsonl\"\n\n[publish.iceberg]\n"+tc.body)
		for _, bin := range []string{idemCore, idemIceberg} {
			r := p.run(bin, "lint", "bad.toml")
			require.Equal(t, 2, r.code, r.stderr)
			require.Contains(t, r.stderr, "bad.toml"+tc.want)
		}
	}
}

// startPostgres starts a throwaway PostgreSQL cluster listening only on a
// Unix socket in a temporary folder and returns the URL of an empty
// database. It skips when the server is not installed, unless CI is set.
func startPostgres(t *testing.T) string {
	t.Helper()
	initdbs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(initdbs) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("PostgreSQL is not installed (apt-get install postgresql): the catalog tests need initdb and postgres under /usr/lib/postgresql/*/bin")
		}
		t.Skip("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): apt-get install postgresql to run the PostgreSQL catalog tests")
	}
	bin := filepath.Dir(initdbs[len(initdbs)-1])
	dir, err := os.MkdirTemp("", "idem-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 { // initdb and postgres refuse to run as root
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root needs the postgres user")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		require.NoError(t, os.Chown(dir, uid, gid))
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd
	}
	data := filepath.Join(dir, "data")
	out, err := command("initdb", "-D", data, "-U", "idem", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput()
	require.NoError(t, err, "initdb: %s", out)
	srv := command("postgres", "-D", data, "-k", dir, "-c", "listen_addresses=", "-p", "5432", "-F",
		"-c", "shared_buffers=16MB", "-c", "max_connections=40")
	var logb bytes.Buffer
	srv.Stderr = &logb
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGINT) // fast shutdown
		_ = srv.Wait()
	})
	sock := filepath.Join(dir, ".s.PGSQL.5432")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "postgres did not start: %s", logb.String())
		time.Sleep(20 * time.Millisecond)
	}
	db, err := sql.Open("pgx", "postgres://idem@localhost/postgres?host="+dir)
	require.NoError(t, err)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, err = db.ExecContext(ctx, "CREATE DATABASE lake")
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // the server is still starting
	}
	require.NoError(t, err, "create the catalog database: %s", logb.String())
	return "postgres://idem@localhost/lake?host=" + dir
}
