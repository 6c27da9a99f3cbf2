package modeltest_test

import (
	"os"
	"testing"

	"github.com/idem-dev/idem/internal/testflags"
)

// TestMain runs half as many tests at once as GOMAXPROCS unless -parallel
// is given (testflags.DefaultParallel): each test drives DuckDB.
func TestMain(m *testing.M) {
	testflags.DefaultParallel()
	os.Exit(m.Run())
}
