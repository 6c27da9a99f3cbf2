//go:build !linux

package run

import (
	"errors"
	"os"
)

// cloneFile is a reflink where the system has one; here it has none.
func cloneFile(dst, src *os.File) error { return errors.New("no reflink") }
