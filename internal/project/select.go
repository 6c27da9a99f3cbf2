package project

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// SelectorHelp says, for --select and --exclude in run --help and plan
// --help, every form a selector takes.
const SelectorHelp = `A selector picks jobs as dbt users type them:
  NAME              the job called NAME
  tag:TAG           the jobs whose job file lists TAG in tags = [...]
  path:PATH         the jobs whose job file or model SQL (file or folder)
                    is PATH, is under folder PATH or matches glob PATH
  state:modified    the jobs whose definition changed since they last
                    committed (transform, schema or config), or never did
  SEL+  +SEL        SEL and everything downstream / upstream of it
  SEL+N  N+SEL      SEL and N generations downstream / upstream
  @SEL              SEL, everything downstream of it and everything
                    upstream of those
  A,B               the jobs both A and B pick (an intersection)
  A B               the jobs A or B picks: selectors given in one
                    argument (space-separated) or in repeated flags add up
--exclude SEL (same forms) removes the jobs it picks, after every --select.`

// selectorForm is the form of a --select expression, for errors.
const selectorForm = "want NAME, tag:TAG, path:PATH or state:modified, each with + before (and its upstreams) or after (and its downstreams), N+ or +N (N generations), @ before, A,B to intersect"

// Selection is what --select and --exclude say: each entry is one
// argument, selectors separated by spaces (a union), each selector a
// comma-separated intersection. No Select picks every job.
type Selection struct {
	Select, Exclude []string
}

// Modified says which jobs of a project state:modified picks; it is called
// once, and only when a selector asks for it.
type Modified func() (map[*job.Job]bool, error)

// Select keeps the jobs that exprs pick, in run order (SelectWith without
// state:modified).
func (p *Project) Select(exprs []string) (*Project, error) {
	return p.SelectWith(exprs, nil)
}

// SelectWith keeps the jobs that exprs pick, in run order (Choose with
// --select only).
func (p *Project) SelectWith(exprs []string, modified Modified) (*Project, error) {
	return p.Choose(Selection{Select: exprs}, modified)
}

// Choose keeps the jobs that s picks, in run order, with dbt's semantics:
// the union of the --select arguments (every job when there is none), each
// argument the union of its space-separated selectors, each selector the
// intersection of its comma-separated parts; then the jobs any --exclude
// picks are removed. See SelectorHelp for the forms. A selector that does
// not parse, a name that is no job, or a tag or path that picks none, is a
// usage error (exit 2) naming the flag and the selector. The selection
// keeps only the upstream links among its own jobs.
func (p *Project) Choose(s Selection, modified Modified) (*Project, error) {
	if len(s.Select) == 0 && len(s.Exclude) == 0 {
		return p, nil
	}
	c := &chooser{p: p, modified: modified}
	keep := map[*job.Job]bool{}
	if len(s.Select) == 0 {
		for _, j := range p.Jobs {
			keep[j] = true
		}
	}
	for _, f := range []struct {
		flag string
		args []string
		pick bool
	}{{"--select", s.Select, true}, {"--exclude", s.Exclude, false}} {
		for _, arg := range f.args {
			picked, err := c.arg(f.flag, arg)
			if err != nil {
				return nil, err
			}
			for j := range picked {
				keep[j] = f.pick
			}
		}
	}
	q := &Project{up: map[*job.Job][]*job.Job{}, down: map[*job.Job][]*job.Job{}}
	for _, j := range p.Jobs {
		if !keep[j] { // not picked, or excluded
			continue
		}
		q.Jobs = append(q.Jobs, j)
		for _, u := range p.up[j] {
			if keep[u] {
				q.up[j] = append(q.up[j], u)
				q.down[u] = append(q.down[u], j)
			}
		}
	}
	return q, nil
}

// chooser evaluates selectors over one project; changed is state:modified's
// answer, asked for once.
type chooser struct {
	p        *Project
	modified Modified
	changed  map[*job.Job]bool
}

type jobSet = map[*job.Job]bool

// arg is the union of the space-separated selectors of one argument.
func (c *chooser) arg(flag, arg string) (jobSet, error) {
	terms := strings.Fields(arg)
	if len(terms) == 0 {
		return nil, &report.UsageError{Msg: fmt.Sprintf("%s %q: %s", flag, arg, selectorForm)}
	}
	out := jobSet{}
	for _, term := range terms {
		var got jobSet
		for i, part := range strings.Split(term, ",") {
			one, err := c.atom(flag, part)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				got = one
				continue
			}
			for j := range got {
				if !one[j] {
					delete(got, j)
				}
			}
		}
		for j := range got {
			out[j] = true
		}
	}
	return out, nil
}

// selectorRE is one selector: @, N+ (parents), method:value or a name, +N
// (children). An empty N is every generation.
var selectorRE = regexp.MustCompile(`^(@)?(?:([0-9]*)\+)?(?:([a-z]+):)?(.+?)(?:\+([0-9]*))?$`)

// atom picks the jobs of one selector with its graph operators.
func (c *chooser) atom(flag, e string) (jobSet, error) {
	form := func() error { return &report.UsageError{Msg: fmt.Sprintf("%s %q: %s", flag, e, selectorForm)} }
	m := selectorRE.FindStringSubmatchIndex(e)
	if m == nil {
		return nil, form()
	}
	group := func(i int) string {
		if m[2*i] < 0 {
			return ""
		}
		return e[m[2*i]:m[2*i+1]]
	}
	at, hasParents, hasChildren := m[2] >= 0, m[4] >= 0, m[10] >= 0
	parents, method, arg, children := group(2), group(3), group(4), group(5)
	if at && hasParents {
		return nil, &report.UsageError{Msg: fmt.Sprintf("%s %s: @ already adds every upstream of what it picks; drop the + before", flag, e)}
	}
	if method == "" {
		method = "name"
	}
	found, err := c.base(flag, e, method, arg)
	if err != nil {
		return nil, err
	}
	out := jobSet{}
	for _, j := range found {
		out[j] = true
	}
	if hasParents {
		c.p.reach(found, c.p.up, depth(parents), out)
	}
	if hasChildren || at {
		c.p.reach(found, c.p.down, depth(children), out)
	}
	if at {
		var all []*job.Job
		for j := range out {
			all = append(all, j)
		}
		c.p.reach(all, c.p.up, -1, out)
	}
	return out, nil
}

// depth reads N of N+ or +N: -1 (every generation) when empty.
func depth(n string) int {
	if n == "" {
		return -1
	}
	d, _ := strconv.Atoi(n)
	return d
}

// base picks the jobs of method:arg, before any graph operator.
func (c *chooser) base(flag, e, method, arg string) ([]*job.Job, error) {
	p := c.p
	bad := func(format string, args ...any) error {
		return &report.UsageError{Msg: fmt.Sprintf("%s %s: ", flag, e) + fmt.Sprintf(format, args...)}
	}
	var found []*job.Job
	switch method {
	case "name":
		if !sqltext.Identifier.MatchString(arg) {
			return nil, &report.UsageError{Msg: fmt.Sprintf("%s %q: %s", flag, e, selectorForm)}
		}
		for _, j := range p.Jobs {
			if j.Name == arg {
				found = append(found, j)
			}
		}
		if len(found) == 0 {
			return nil, bad("no job named %s in the project (jobs: %s)", arg, strings.Join(p.names(), ", "))
		}
	case "tag":
		var tags []string
		for _, j := range p.Jobs {
			if slices.Contains(j.Tags, arg) {
				found = append(found, j)
			}
			tags = append(tags, j.Tags...)
		}
		if len(found) == 0 {
			slices.Sort(tags)
			known := strings.Join(slices.Compact(tags), ", ")
			if known == "" {
				known = "none"
			}
			return nil, bad("no job of the project has tag %s (tags: %s)", arg, known)
		}
	case "path":
		for _, j := range p.Jobs {
			if pathPicks(arg, j.File) || j.ModelFile != "" && pathPicks(arg, j.ModelFile) || j.ModelDir != "" && pathPicks(arg, j.ModelDir) {
				found = append(found, j)
			}
		}
		if len(found) == 0 {
			return nil, bad("no job file of the project is %s, under it or matches it, nor any model SQL file or folder", arg)
		}
	case "state":
		if arg != "modified" {
			return nil, bad("the state selector is state:modified")
		}
		if c.modified == nil {
			return nil, bad("state:modified needs the jobs' databases; use idem run or idem plan")
		}
		if c.changed == nil {
			var err error
			if c.changed, err = c.modified(); err != nil {
				return nil, err
			}
		}
		for _, j := range p.Jobs {
			if c.changed[j] {
				found = append(found, j)
			}
		}
	default:
		return nil, &report.UsageError{Msg: fmt.Sprintf("%s %q: %s", flag, e, selectorForm)}
	}
	return found, nil
}

// reach adds to keep the jobs up to depth links away from the jobs of from
// (every one reachable when depth < 0).
func (p *Project) reach(from []*job.Job, links map[*job.Job][]*job.Job, depth int, keep jobSet) {
	seen := jobSet{}
	frontier := from
	for level := 0; len(frontier) > 0 && (depth < 0 || level < depth); level++ {
		var next []*job.Job
		for _, j := range frontier {
			for _, n := range links[j] {
				if !seen[n] {
					seen[n] = true
					keep[n] = true
					next = append(next, n)
				}
			}
		}
		frontier = next
	}
}

// pathPicks says whether path:PATH picks the file or folder file: the same
// path, one under folder PATH, or one matching glob PATH, all compared as
// absolute paths from the working directory.
func pathPicks(pattern, file string) bool {
	pat, err1 := filepath.Abs(pattern)
	f, err2 := filepath.Abs(file)
	if err1 != nil || err2 != nil {
		return false
	}
	if f == pat || strings.HasPrefix(f, pat+string(filepath.Separator)) {
		return true
	}
	ok, _ := filepath.Match(pat, f)
	return ok
}

func (p *Project) names() []string {
	var out []string
	for _, j := range p.Jobs {
		out = append(out, j.Name)
	}
	sort.Strings(out)
	return slices.Compact(out)
}
