//go:build !linux

package s3server

import "os/exec"

// setDeathSignal does nothing here: Stop ends the server.
func setDeathSignal(cmd *exec.Cmd) {}
