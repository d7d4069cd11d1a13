package enforce_test

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/enforce"
)

// Signal kills only a process still confirmed as the one to stop.
func TestSignal(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	if err := enforce.Signal(pid, func() bool { return false }); !errors.Is(err, enforce.ErrGone) {
		t.Errorf("a PID that is no longer the process to stop: %v, want ErrGone", err)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process was signalled anyway: %v", err)
	}
	if err := enforce.Signal(pid, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the process ended with %v, want SIGKILL", err)
	}
	if err := enforce.Signal(pid, func() bool { return true }); !errors.Is(err, enforce.ErrGone) {
		t.Errorf("a reaped process: %v, want ErrGone", err)
	}
}
