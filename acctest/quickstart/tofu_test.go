package quickstart

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/internal/cluster"
)

// tofuIn returns a runner of the tofu binary in dir with env: its combined
// output and exit code.
func tofuIn(t *testing.T, dir string, env []string) func(args ...string) (string, int) {
	t.Helper()
	tofu, err := cluster.ToolPath(cluster.FindBinDir(), "tofu")
	if err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, int) {
		t.Helper()
		// Bounded well inside the test's own timeout, and the whole process
		// group killed on expiry, so a hung apply leaves no provider behind.
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, tofu, args...)
		cmd.Dir, cmd.Env = dir, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
}
