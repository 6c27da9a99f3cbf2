package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/runner"
)

func (a *app) newVersionCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print idem's version and the DuckDB it bundles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			duck, err := runner.DuckDBVersion(cmd.Context())
			if err != nil {
				return a.fail(jsonOut, err)
			}
			info, _ := debug.ReadBuildInfo()
			v := buildVersion(version, info)
			if jsonOut {
				return a.printJSON(map[string]any{"idem": v.String(), "module_version": v.module, "revision": v.revision, "modified": v.modified, "duckdb": duck, "go": runtime.Version()})
			}
			fmt.Fprintf(a.stdout, "idem %s (DuckDB %s, %s)\n", v, duck, runtime.Version())
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}

// idemVersion is what idem version reports: the version set with -ldflags,
// else the module version of a build from a tag (go install ...@v1.2.3),
// and the VCS revision of a build from a checkout (go build in the repo).
type idemVersion struct {
	module   string // "v1.2.3", or "" for a development build
	revision string // the commit, or ""
	modified bool   // the checkout had uncommitted changes
}

// buildVersion reads the version from the -ldflags value when one was set
// (anything but "dev"), else from the build info.
func buildVersion(ldflags string, info *debug.BuildInfo) idemVersion {
	var v idemVersion
	if ldflags != "" && ldflags != "dev" {
		v.module = ldflags
	}
	if info == nil {
		return v
	}
	if v.module == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v.module = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.revision = s.Value
		case "vcs.modified":
			v.modified = s.Value == "true"
		}
	}
	return v
}

// String is "v1.2.3", a pseudo-version, "dev (rev 0123456789ab, modified)"
// or "dev".
func (v idemVersion) String() string {
	s := v.module
	if s == "" {
		s = "dev"
	}
	rev := v.revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	// A pseudo-version (v0.0.0-20261130215327-952afb1f4ea9) names the
	// revision already.
	if rev != "" && !strings.Contains(s, rev) {
		if v.modified {
			rev += ", modified"
		}
		s += " (rev " + rev + ")"
	}
	return s
}
