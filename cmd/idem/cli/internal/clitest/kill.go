package clitest

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// SameFile reports whether the files at a and b have the same bytes, or are
// both absent.
func SameFile(t *testing.T, a, b string) bool {
	t.Helper()
	x, errA := os.ReadFile(a)
	y, errB := os.ReadFile(b)
	if os.IsNotExist(errA) && os.IsNotExist(errB) {
		return true
	}
	if errA != nil || errB != nil {
		return false
	}
	return bytes.Equal(x, y)
}

// KillTrials is the number of random kills a kill test makes: short, or
// long with IDEM_LONG=1; IDEM_KILL_TRIALS=N sets it.
func KillTrials(t *testing.T, short, long int) int {
	t.Helper()
	if s := os.Getenv("IDEM_KILL_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "IDEM_KILL_TRIALS must be an integer")
		return n
	}
	return LongOr(short, long)
}
