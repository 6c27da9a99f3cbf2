//go:build unix

package lake

import (
	"errors"
	"syscall"
)

// processAlive says a process with this id exists (as run.ProcessAlive,
// which lake cannot import: run reads lakes through source).
func processAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
