package clitest

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// IdemProcess is idem started as a separate process.
type IdemProcess struct {
	Cmd            *exec.Cmd
	Stdout, Stderr bytes.Buffer
	done           chan struct{}
	Started        time.Time
	Elapsed        time.Duration
}

// Wait waits for the process to exit and returns its exit code.
func (p *IdemProcess) Wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("idem %v still running after %v; stderr: %s", p.Cmd.Args[1:], limit, p.Stderr.String())
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Exited reports whether the process has ended.
func (p *IdemProcess) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// StartIdem starts this test binary as idem with args and env added, in
// the test's folder, and ends it when the test does.
func StartIdem(t *testing.T, env []string, args ...string) *IdemProcess {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	p := &IdemProcess{Cmd: exec.Command(exe, args...), done: make(chan struct{})}
	p.Cmd.Env = append(append(os.Environ(), processEnv+"=1"), env...)
	p.Cmd.Stdout, p.Cmd.Stderr = &p.Stdout, &p.Stderr
	p.Started = time.Now()
	require.NoError(t, p.Cmd.Start())
	go func() {
		_ = p.Cmd.Wait()
		p.Elapsed = time.Since(p.Started)
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.Cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}
