package s3server

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills the server when the test binary that started it
// dies (a test killed by its timeout leaves no server behind).
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
