package cli

import (
	"runtime/debug"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestBuildVersion: idem version names the module version of a build from a
// tag and the VCS revision of a build from a checkout, not just "dev".
func TestBuildVersion(t *testing.T) {
	t.Parallel()
	rev := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}
	for _, tc := range []struct {
		name, ldflags string
		info          *debug.BuildInfo
		want          string
	}{
		{"no build info", "dev", nil, "dev"},
		{"go install from a tag", "dev", &debug.BuildInfo{Main: debug.Module{Path: "github.com/idem-dev/idem", Version: "v0.4.0"}}, "v0.4.0"},
		{"go build in a checkout", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, "dev (rev 0123456789ab)"},
		{"modified checkout", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}}, "dev (rev 0123456789ab, modified)"},
		{"pseudo-version names the revision", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261130120000-0123456789ab"}, Settings: rev}, "v0.0.0-20261130120000-0123456789ab"},
		{"tag with revision", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}, Settings: rev}, "v0.4.0 (rev 0123456789ab)"},
		{"ldflags win", "v9.9.9", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "v9.9.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, buildVersion(tc.ldflags, tc.info).String())
		})
	}
}

// TestVersionCommandReportsBuildInfo: in a test binary the build info has
// no module version, so the command says dev, and --json carries the
// fields.
func TestVersionCommandReportsBuildInfo(t *testing.T) {
	t.Parallel()
	code, out, errOut := clitest.InProcess(t, "version", "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"revision":`)
	require.Contains(t, out, `"module_version":`)
}
