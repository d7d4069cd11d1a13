// Package proctest starts the commands tests drive (the gpuslice CLI,
// tofu) and lets them read the output while the command runs.
package proctest

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// Output is a command's combined output, safe to read while it writes.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Start starts cmd with its output in an Output and returns that and a
// channel closed when it exits. The test's cleanup kills it by PID — its
// whole process group when cmd has one of its own (Setpgid) — unless it
// has exited.
func Start(tb testing.TB, cmd *exec.Cmd) (*Output, <-chan struct{}) {
	tb.Helper()
	out := &Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		select {
		case <-exited:
		default:
			if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			} else {
				_ = cmd.Process.Kill()
			}
			<-exited
		}
	})
	return out, exited
}
