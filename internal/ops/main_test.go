package ops_test

import (
	"fmt"
	"os"
	"testing"
)

// fixtureRoot holds the fixtures built once per run of the package (the
// checkpoint chain); TestMain makes it and removes it at the end.
var fixtureRoot string

func TestMain(m *testing.M) {
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
