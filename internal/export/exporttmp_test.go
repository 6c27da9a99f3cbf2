package export

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"
)

// deadPID is the id of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	require.False(t, run.ProcessAlive(cmd.Process.Pid))
	return cmd.Process.Pid
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// Where the system cannot exchange two folders in one rename, the swap is
// two renames; a kill between them leaves the previous export aside, and
// the next export's clean-up renames it back. Temporary files of a live
// export stay; those of other outputs are not touched.
func TestSwapDirWithoutExchange(t *testing.T) {
	t.Parallel()
	noExchange := func(a, b string) error { return errNoExchange }
	nofault := func(string) {}

	t.Run("swap", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "parts")
		writeTree(t, out, map[string]string{ManifestName: "old", "v=1/data.csv": "old"})
		tmp, err := exportTempName(out)
		require.NoError(t, err)
		writeTree(t, tmp, map[string]string{ManifestName: "new", "v=2/data.csv": "new"})
		var points []string
		require.NoError(t, swapDir(tmp, out, noExchange, func(p string) {
			points = append(points, p)
			if p == FaultExportAfterSwap {
				require.ElementsMatch(t, []string{"parts", filepath.Base(tmp) + ".old"}, names(t, dir), "the previous export is aside until the new one is in place")
			}
		}))
		require.Equal(t, []string{FaultExportBeforeSwap, FaultExportAfterSwap}, points)
		require.Equal(t, []string{"parts"}, names(t, dir))
		require.ElementsMatch(t, []string{ManifestName, "v=2"}, names(t, out))
	})

	t.Run("killed_between_renames", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "parts")
		dead := strconv.Itoa(deadPID(t))
		live := strconv.Itoa(os.Getppid())
		tag := exportTempPrefix + "parts-"
		// The state a kill between the renames leaves: no out, the previous
		// export aside, the complete new one in its temporary folder.
		writeTree(t, filepath.Join(dir, tag+dead+"-0123456789abcdef.old"), map[string]string{ManifestName: "old"})
		writeTree(t, filepath.Join(dir, tag+dead+"-0123456789abcdef"), map[string]string{ManifestName: "new"})
		writeTree(t, filepath.Join(dir, tag+live+"-fedcba9876543210"), map[string]string{ManifestName: "live"})
		writeTree(t, dir, map[string]string{exportTempPrefix + "other-" + dead + "-0123456789abcdef": "another output's"})
		require.NoError(t, cleanExportTemps(out))
		data, err := os.ReadFile(filepath.Join(out, ManifestName))
		require.NoError(t, err)
		require.Equal(t, "old", string(data), "the previous export is back in place")
		require.ElementsMatch(t, []string{"parts", tag + live + "-fedcba9876543210", exportTempPrefix + "other-" + dead + "-0123456789abcdef"}, names(t, dir))

		require.NoError(t, swapDir(func() string {
			tmp, err := exportTempName(out)
			require.NoError(t, err)
			writeTree(t, tmp, map[string]string{ManifestName: "new"})
			return tmp
		}(), out, noExchange, nofault))
		data, err = os.ReadFile(filepath.Join(out, ManifestName))
		require.NoError(t, err)
		require.Equal(t, "new", string(data))
	})
}

// Partition folder names: NULL's is taken by no value, each short name
// unescapes to its value, and long names stay within the limit and apart.
func TestPartitionDir(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	require.Equal(t, "v=__HIVE_DEFAULT_PARTITION__", partitionDir("v", nil))
	require.Equal(t, "v=%5F_HIVE_DEFAULT_PARTITION__", partitionDir("v", s("__HIVE_DEFAULT_PARTITION__")))
	require.Equal(t, "v=%4EULL", partitionDir("v", s("NULL")))
	require.Equal(t, "v=%6Eull", partitionDir("v", s("null")))
	require.Equal(t, "v=a%2Fb%3Dc%25d%0A", partitionDir("v", s("a/b=c%d\n")))
	require.Equal(t, "v=..", partitionDir("v", s("..")))
	require.Equal(t, "v=", partitionDir("v", s("")))
	require.Equal(t, "my%20col=x", partitionDir("my col", s("x")))
	seen := map[string]bool{}
	for i := 1; i < 400; i++ {
		for _, c := range []string{"a", "%", "/"} {
			v := ""
			for range i {
				v += c
			}
			name := partitionDir("v", &v)
			require.LessOrEqual(t, len(name), maxPartitionDir)
			require.False(t, seen[name], "two values give %s", name)
			seen[name] = true
		}
	}
}
