//go:build unix

package run

import (
	"errors"
	"syscall"
)

// ProcessAlive reports whether a process with this id exists (signal 0
// checks without sending anything; EPERM means it exists under another
// user). An id that names no single process (0 or below) counts as alive,
// so that nothing is removed on its account.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
