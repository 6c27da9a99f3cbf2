//go:build !unix

package lake

// processAlive cannot tell here: every process counts as alive, so no
// reader's copies are removed under it.
func processAlive(pid int) bool { return true }
