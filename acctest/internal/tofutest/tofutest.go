// Package tofutest runs the OpenTofu binary a user would run (bin/tofu)
// against a test's control plane, with the provider `make install` builds
// into a local filesystem mirror: no registry is reachable, nothing is
// downloaded. The acceptance tests that apply examples/ with OpenTofu
// (acctest/quickstart, acctest/nodes) share it.
package tofutest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// root is the repository's root folder, found from this file rather than
// from the working directory of whichever test package calls.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Install runs `make install` into a temporary mirror, as a user would,
// and returns the CLI configuration that makes tofu install from it.
func Install(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	rc := filepath.Join(dir, "gpuslice.tfrc")
	cmd := exec.Command("make", "-s", "install", "MIRROR="+filepath.Join(dir, "mirror"), "TFRC="+rc)
	cmd.Dir = root()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	return rc
}

// Example copies examples/ into a temporary directory (the examples refer
// to each other's modules) and returns the copy of examples/<name>.
func Example(t testing.TB, name string) string {
	t.Helper()
	work := t.TempDir()
	if err := os.CopyFS(filepath.Join(work, "examples"), os.DirFS(filepath.Join(root(), "examples"))); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(work, "examples", name)
}

// Env is the environment tofu runs in against c, installing providers as
// the CLI configuration rc says, with vars (TF_VAR_...) added. Every proxy
// points nowhere, so a registry lookup fails.
func Env(c *cluster.Cluster, rc string, vars ...string) []string {
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "KUBE_CONFIG_PATH="+c.KubeconfigPath, "TF_IN_AUTOMATION=1",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9")
	return append(env, vars...)
}

// In returns a runner of the tofu binary in dir with env: its combined
// output and exit code. It skips t (fails it in CI) when tofu is not built.
func In(t testing.TB, dir string, env []string) func(args ...string) (string, int) {
	t.Helper()
	tofu, err := cluster.ToolPath(cluster.FindBinDir(), cluster.Tofu)
	if err != nil {
		testenv.Unavailable(t, "%v", err)
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
