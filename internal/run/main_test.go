package run_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/idem-dev/idem/internal/testflags"
)

// TestMain runs half as many tests at once as GOMAXPROCS unless -parallel
// is given (testflags.DefaultParallel): each test drives a DuckDB and go
// test ./... runs GOMAXPROCS packages at once.
func TestMain(m *testing.M) {
	testflags.DefaultParallel()
	os.Exit(m.Run())
}

// TestJemallocKeepsPages: the test binary's jemalloc arenas keep the pages
// a database close would purge (testflags.KeptArenas), else every open of
// the tests faults its memory in again (docs/reliability.md).
func TestJemallocKeepsPages(t *testing.T) {
	t.Parallel()
	kept, of := testflags.KeptArenas()
	if runtime.GOOS != "linux" {
		t.Skip("the hooks are set on Linux only")
	}
	if of < 1 || kept != of {
		t.Fatalf("%d of %d jemalloc arenas keep their pages, want all (and at least one)", kept, of)
	}
}
