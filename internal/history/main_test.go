package history_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/idem-dev/idem/internal/testflags"
)

// fixtureRoot holds the fixtures built once per run of the package (the
// checkpoint chain); TestMain makes it and removes it at the end.
var fixtureRoot string

// TestMain makes the folder of the shared fixtures, and runs half as many
// tests at once as GOMAXPROCS unless -parallel is given
// (testflags.DefaultParallel).
func TestMain(m *testing.M) {
	testflags.DefaultParallel()
	dir, err := os.MkdirTemp("", "idem-ops-fixtures-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtureRoot = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
