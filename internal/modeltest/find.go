package modeltest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/project"
	"github.com/idem-dev/idem/internal/report"
)

// Suite is the test files of one project folder, whose job files hold the
// models the tests name and their upstreams.
type Suite struct {
	Dir   string
	Files []string
}

// Find resolves the paths idem test is given (none: the working
// directory) into suites:
//
//   - a folder holding a folder tests/: the *.toml in tests/, against the
//     jobs of the folder;
//   - any other folder: the *.toml in it, against the jobs of the folder
//     above it (a tests/ folder given itself);
//   - a file: that test file, against the jobs of its folder if it holds
//     job files, else of the folder above.
//
// A path that does not exist, a folder with no test file, or a project
// folder without tests/ is a *report.UsageError (exit 2).
func Find(paths []string) ([]Suite, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var suites []Suite
	at := map[string]int{}
	seen := map[string]bool{}
	add := func(dir string, files []string) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			abs = dir
		}
		i, ok := at[abs]
		if !ok {
			i = len(suites)
			at[abs] = i
			suites = append(suites, Suite{Dir: dir})
		}
		for _, f := range files {
			a, err := filepath.Abs(f)
			if err != nil {
				a = f
			}
			if !seen[a] {
				seen[a] = true
				suites[i].Files = append(suites[i].Files, f)
			}
		}
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, report.Usage("%s: no such test file or folder", p)
			}
			return nil, report.Usage("%s: %v", p, unwrapPath(err))
		}
		if !st.IsDir() {
			dir := filepath.Dir(p)
			if !holdsJobs(dir) {
				dir = filepath.Join(dir, "..")
			}
			add(dir, []string{p})
			continue
		}
		if st, err := os.Stat(filepath.Join(p, "tests")); err == nil && st.IsDir() {
			files, err := testFiles(filepath.Join(p, "tests"))
			if err != nil {
				return nil, err
			}
			add(p, files)
			continue
		}
		if holdsJobs(p) {
			return nil, report.Usage("%s holds job files but no tests/ folder: write the tests in %s (idem init DIR --mode select writes one)", p, filepath.Join(p, "tests", "NAME.toml"))
		}
		files, err := testFiles(p)
		if err != nil {
			return nil, err
		}
		add(filepath.Join(p, ".."), files)
	}
	return suites, nil
}

// testFiles lists the *.toml files directly in dir, in name order; none
// is a usage error.
func testFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, report.Usage("read folder %s: %v", dir, err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".toml") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, report.Usage("folder %s holds no test files (*.toml with [[test]] tables)", dir)
	}
	slices.Sort(out)
	return out, nil
}

// holdsJobs says whether dir holds job files.
func holdsJobs(dir string) bool {
	_, err := project.Files([]string{dir})
	return err == nil
}
