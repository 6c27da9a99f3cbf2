package project

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/report"
)

// Project is a set of jobs in run order: every job comes after the jobs of
// the project it reads as upstreams.
type Project struct {
	Jobs []*job.Job
	// up and down link a job to the project's jobs it reads and that read
	// it (same database, by name).
	up, down map[*job.Job][]*job.Job
}

// Files lists the job files that paths name: a file as it is, a folder as
// every *.toml file directly in it, in name order. A path named twice, or
// a file found twice through a folder, counts once.
func Files(paths []string) ([]string, error) {
	files, _, err := FilesSkipping(paths)
	return files, err
}

// FilesSkipping is Files that also names the *.toml files of the folders
// that are not job files (another tool's TOML, with no top-level
// pipeline =), which it left out.
func FilesSkipping(paths []string) (files, skipped []string, err error) {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		abs, err := filepath.Abs(p)
		if err != nil {
			abs = p
		}
		if !seen[abs] {
			seen[abs] = true
			out = append(out, p)
		}
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || !st.IsDir() {
			add(p) // a missing file is reported by the job loader
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, nil, &report.UsageError{Msg: fmt.Sprintf("read folder %s: %v", p, err)}
		}
		n := 0
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".toml") || e.Name() == "pipeline.toml" {
				continue
			}
			if e.Type()&fs.ModeType != 0 && e.Type()&fs.ModeSymlink == 0 {
				continue // not a regular file (a FIFO, a device)
			}
			file := filepath.Join(p, e.Name())
			if !isJobFile(file) {
				skipped = append(skipped, file) // another tool's TOML (sqlfluff.toml, say)
				continue
			}
			add(file)
			n++
		}
		if n == 0 {
			return nil, skipped, &report.UsageError{Msg: fmt.Sprintf("folder %s holds no job files (*.toml with pipeline = ...)", p)}
		}
	}
	return out, skipped, nil
}

// New links and orders jobs: a job after the jobs it reads as upstreams
// and the jobs its relationships audits check against. Two jobs of one database with the same name,
// or a cycle of upstream references, are a usage error (exit 2) that names
// them. An upstream that is no job of the project is left to the run,
// which reads what that job committed.
func New(jobs []*job.Job) (*Project, error) {
	p := &Project{up: map[*job.Job][]*job.Job{}, down: map[*job.Job][]*job.Job{}}
	byName := map[string]*job.Job{}
	for _, j := range jobs {
		k := nameKey(j, j.Name)
		if other, ok := byName[k]; ok {
			return nil, &report.UsageError{Msg: fmt.Sprintf("job %s is defined twice for database %s: in %s and in %s", j.Name, j.Database, other.File, j.File)}
		}
		byName[k] = j
	}
	for _, j := range jobs {
		// A relationships audit reads its to job as committed: that job
		// runs first, like an upstream.
		ups := j.SortedUpstream()
		for _, u := range j.AuditUpstream() {
			if !slices.Contains(ups, u) {
				ups = append(ups, u)
			}
		}
		for _, u := range ups {
			if uj, ok := byName[nameKey(j, u)]; ok {
				p.up[j] = append(p.up[j], uj)
				p.down[uj] = append(p.down[uj], j)
			}
		}
	}
	order, err := p.order(jobs)
	if err != nil {
		return nil, err
	}
	p.Jobs = order
	return p, nil
}

// nameKey is the identity of job name in j's database.
func nameKey(j *job.Job, name string) string {
	db := j.Database
	if abs, err := filepath.Abs(db); err == nil && db != "" {
		db = abs
	}
	return db + "\x00" + name
}

// order sorts jobs so each comes after its upstreams (Kahn's algorithm;
// among jobs ready together, by database then name, so the order is the
// same every time). A cycle is a usage error naming its jobs in order.
func (p *Project) order(jobs []*job.Job) ([]*job.Job, error) {
	less := func(a, b *job.Job) int {
		if c := strings.Compare(a.Database, b.Database); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	}
	waiting := map[*job.Job]int{}
	var ready []*job.Job
	for _, j := range jobs {
		waiting[j] = len(p.up[j])
		if waiting[j] == 0 {
			ready = append(ready, j)
		}
	}
	var out []*job.Job
	for len(ready) > 0 {
		slices.SortFunc(ready, less)
		j := ready[0]
		ready = ready[1:]
		out = append(out, j)
		for _, d := range p.down[j] {
			waiting[d]--
			if waiting[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	if len(out) == len(jobs) {
		return out, nil
	}
	// Some jobs wait on each other: name one cycle.
	left := map[*job.Job]bool{}
	for _, j := range jobs {
		if waiting[j] > 0 {
			left[j] = true
		}
	}
	return nil, &report.UsageError{Msg: "upstream references form a cycle: " + p.cycle(left, less)}
}

// cycle walks upstream links among the jobs left from the smallest one
// until a job repeats, and names the cycle it closed: "a → b → a".
func (p *Project) cycle(left map[*job.Job]bool, less func(a, b *job.Job) int) string {
	var start *job.Job
	for j := range left {
		if start == nil || less(j, start) < 0 {
			start = j
		}
	}
	var path []*job.Job
	at := map[*job.Job]int{}
	for j := start; ; {
		if i, ok := at[j]; ok {
			names := make([]string, 0, len(path)-i+1)
			for _, c := range path[i:] {
				names = append(names, c.Name)
			}
			names = append(names, j.Name)
			// The walk follows upstream links: reverse it to read in run
			// order (a job before the job that reads it).
			slices.Reverse(names)
			return strings.Join(names, " → ")
		}
		at[j] = len(path)
		path = append(path, j)
		var next *job.Job
		for _, u := range p.up[j] {
			if left[u] && (next == nil || less(u, next) < 0) {
				next = u
			}
		}
		j = next
	}
}

// Upstream lists the project's jobs that j reads, by name.
func (p *Project) Upstream(j *job.Job) []*job.Job { return p.up[j] }

// Downstream names every job of the project that reads j, directly or
// through others, in run order.
func (p *Project) Downstream(j *job.Job) []string {
	keep := map[*job.Job]bool{}
	p.walk(j, p.down, keep)
	var out []string
	for _, d := range p.Jobs {
		if keep[d] {
			out = append(out, d.Name)
		}
	}
	return out
}

func (p *Project) walk(j *job.Job, links map[*job.Job][]*job.Job, keep map[*job.Job]bool) {
	for _, n := range links[j] {
		if !keep[n] {
			keep[n] = true
			p.walk(n, links, keep)
		}
	}
}

// BlockedBy names the jobs among failed that j reads, directly or through
// other jobs of the project, by name: a job downstream of a failed or
// refused job is not run. Empty when nothing j needs failed.
func (p *Project) BlockedBy(j *job.Job, failed map[*job.Job]bool) []string {
	var out []string
	seen := map[*job.Job]bool{}
	var visit func(*job.Job)
	visit = func(x *job.Job) {
		for _, u := range p.up[x] {
			if seen[u] {
				continue
			}
			seen[u] = true
			if failed[u] {
				out = append(out, u.Name)
			}
			visit(u)
		}
	}
	visit(j)
	sort.Strings(out)
	return out
}

// Groups splits the jobs by database file, each group in run order, the
// groups in order of their first job. Upstreams live in the job's own
// database, so groups never wait on each other: they may run at once,
// while the jobs of one group run one after another.
func (p *Project) Groups() [][]*job.Job {
	var out [][]*job.Job
	at := map[string]int{}
	for _, j := range p.Jobs {
		k := nameKey(j, "")
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], j)
	}
	return out
}

// isJobFile says whether the TOML file at path is a job file: one that sets
// pipeline at its top level (before any [table]). Another tool's TOML in a
// project folder is not read as a job. A file that cannot be read, or a
// link to something other than a regular file, counts as a job file, so
// that loading it reports why.
func isJobFile(path string) bool {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, jobfs.MaxTOMLBytes))
	sc.Buffer(make([]byte, 64<<10), int(jobfs.MaxTOMLBytes))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			return false
		}
		if k, _, ok := strings.Cut(line, "="); ok && strings.Trim(strings.TrimSpace(k), `"'`) == "pipeline" {
			return true
		}
	}
	return sc.Err() != nil
}
