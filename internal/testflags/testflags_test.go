package testflags

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// given is whether -parallel was on the command line; inForce is what
// DefaultParallel returned.
var (
	given   bool
	inForce int
)

func TestMain(m *testing.M) {
	flag.Parse()
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	inForce = DefaultParallel()
	os.Exit(m.Run())
}

// TestDefaultParallel: without -parallel the value in force is half of
// GOMAXPROCS, at least 1; with it, the value given (go test -parallel 3
// ./internal/testflags).
func TestDefaultParallel(t *testing.T) {
	if got := flag.Lookup("test.parallel").Value.String(); got != strconv.Itoa(inForce) {
		t.Fatalf("-parallel is %s, DefaultParallel returned %d", got, inForce)
	}
	if want := max(1, runtime.GOMAXPROCS(0)/2); !given && inForce != want {
		t.Fatalf("-parallel not given: %d in force, want %d", inForce, want)
	}
}

// TestWaitingParallel: once -parallel is in force (given, or set by
// DefaultParallel in TestMain), WaitingParallel keeps it: a package's
// first choice holds.
func TestWaitingParallel(t *testing.T) {
	if got := WaitingParallel(); got != inForce {
		t.Fatalf("WaitingParallel after DefaultParallel: %d, want %d in force", got, inForce)
	}
}
