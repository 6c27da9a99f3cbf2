package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestBenchNoHistoryIgnored: the idem that ships ignores
// IDEM_BENCH_NO_HISTORY=1 (only cmd/idem-bench's -tags idembench build
// reads it): runs made with it set keep history, so snapshot 1 exported
// after snapshot 2 has the bytes it had when it was the latest, and its
// rerun reproduces it.
func TestBenchNoHistoryIgnored(t *testing.T) {
	t.Parallel()
	if (&app{getenv: func(string) string { return "1" }}).benchNoHistory() {
		t.Skip("built with -tags idembench: IDEM_BENCH_NO_HISTORY is read on purpose")
	}
	j := clitest.NewGuardJob(t)
	env := func(k string) string {
		if k == "IDEM_BENCH_NO_HISTORY" {
			return "1"
		}
		return os.Getenv(k)
	}
	idem := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := mainEnv(context.Background(), args, &stdout, &stderr, env)
		return code, stdout.String(), stderr.String()
	}
	code, _, stderr := idem("run", j.File)
	require.Equal(t, 0, code, stderr)
	first := filepath.Join(j.Dir, "first.csv")
	code, _, stderr = idem("export", j.File, "--out", first)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = idem("run", j.File, "--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
	require.Equal(t, 0, code, stderr)

	pinned := filepath.Join(j.Dir, "pinned.csv")
	code, _, stderr = idem("export", j.File, "--snapshot", "1", "--out", pinned)
	require.Equal(t, 0, code, stderr)
	want, err := os.ReadFile(first)
	require.NoError(t, err)
	got, err := os.ReadFile(pinned)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "snapshot 1 read back after snapshot 2")
	code, stdout, stderr := idem("rerun", j.File, "--snapshot", "1", "--json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"reproduced":true`)
}
