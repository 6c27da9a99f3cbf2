package runner

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestLayering: a lower layer never imports a higher one. Each package
// listed here may depend only on the idem packages it names; database/sql
// and DuckDB are forbidden to the pure ones. It reads go list's view of the
// build, so an import added anywhere in the package (tests aside) fails it.
func TestLayering(t *testing.T) {
	t.Parallel()
	const module = "github.com/idem-dev/idem"
	for _, tc := range []struct {
		pkg       string
		idem      []string // idem packages it may depend on
		forbidden []string // import path prefixes it must not depend on
	}{
		{pkg: module + "/runner/job", forbidden: []string{"database/sql", "github.com/duckdb/"}},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			t.Parallel()
			deps := goListDeps(t, tc.pkg)
			if len(deps) == 0 {
				t.Fatalf("go list found no dependencies of %s", tc.pkg)
			}
			for _, d := range deps {
				if d == module || strings.HasPrefix(d, module+"/") {
					if !slices.Contains(tc.idem, d) {
						t.Errorf("%s depends on %s: it may depend on no idem package but %v", tc.pkg, d, tc.idem)
					}
				}
				for _, f := range tc.forbidden {
					if d == f || strings.HasPrefix(d, f) {
						t.Errorf("%s depends on %s, which it must not (forbidden: %v)", tc.pkg, d, tc.forbidden)
					}
				}
			}
		})
	}
}

// goListDeps is `go list -f '{{join .Deps "\n"}}' pkg`: every package pkg
// depends on, directly or not.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to list the dependencies of %s: %v", pkg, err)
		}
	}
	out, err := exec.Command(gobin, "list", "-f", `{{join .Deps "\n"}}`, pkg).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", pkg, err, msg)
	}
	return strings.Fields(string(out))
}
