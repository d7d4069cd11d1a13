// Package interrupt interrupts a running tofu apply of the gpuslice
// provider, as Ctrl-C in a terminal does (SIGINT to the process group), on
// the local control plane.
package interrupt

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/proc/proctest"
)

func TestMain(m *testing.M) {
	os.Exit(clustertest.Main(m, cluster.Options{}, nil))
}

// config is a package, a quota and n workloads that run no pod.
func config(n int) string {
	var b strings.Builder
	b.WriteString(`
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}
resource "gpuslice_package" "small" {
  name      = "intr-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}
resource "gpuslice_quota" "q" {
  namespace       = "intr"
  slices          = { (gpuslice_package.small.name) = 1 }
  cpu_requests    = "100"
}
`)
	for i := range n {
		fmt.Fprintf(&b, `
resource "gpuslice_workload" "w%d" {
  namespace = gpuslice_quota.q.namespace
  name      = "w%d"
  package   = gpuslice_package.small.name
  replicas  = 0
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`, i, i)
	}
	return b.String()
}

// Ctrl-C while tofu applies: tofu stops, the provider lets the writes in
// flight finish, and state and cluster stay consistent — the next plan
// shows exactly the resources not created (nothing to change or destroy),
// and one apply finishes the job.
func TestTofuApplyInterrupted(t *testing.T) {
	c := clustertest.Shared(t)
	tofu, err := cluster.ToolPath(cluster.FindBinDir(), "tofu")
	if err != nil {
		t.Fatal(err)
	}
	plugins := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(plugins, "terraform-provider-gpuslice"), "../../cmd/terraform-provider-gpuslice")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the provider: %v\n%s", err, out)
	}
	rc := filepath.Join(t.TempDir(), "dev.tfrc")
	os.WriteFile(rc, []byte(`provider_installation {
  dev_overrides {
    "registry.terraform.io/gpuslice/gpuslice" = "`+plugins+`"
  }
  direct {}
}
`), 0o644)
	dir := t.TempDir()
	const n = 60
	os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config(n)), 0o644)
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "KUBE_CONFIG_PATH="+c.KubeconfigPath, "TF_IN_AUTOMATION=1",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9")
	// start runs tofu in a process group of its own (with the provider it
	// starts), as a terminal would; cleanup kills the group.
	start := func(args ...string) (*exec.Cmd, *proctest.Output, <-chan struct{}) {
		cmd := exec.Command(tofu, args...)
		cmd.Dir, cmd.Env = dir, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, exited := proctest.Start(t, cmd)
		return cmd, out, exited
	}
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd, out, exited := start(args...)
		select {
		case <-exited:
		case <-time.After(5 * time.Minute): // a bound for a hung test
			t.Fatalf("tofu %v hung:\n%s", args, out.String())
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}

	cmd, out, exited := start("apply", "-auto-approve", "-input=false", "-no-color", "-parallelism=2")
	for strings.Count(out.String(), "gpuslice_workload.") < 2*10 || strings.Count(out.String(), "Creation complete") < 10 {
		select {
		case <-exited:
			t.Fatalf("tofu apply ended before 10 resources were created:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // Ctrl-C: the whole group
	select {
	case <-exited:
	case <-time.After(5 * time.Minute):
		t.Fatalf("tofu did not stop after Ctrl-C:\n%s", out.String())
	}
	text := out.String()
	if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(text, "Interrupt received") {
		t.Fatalf("tofu apply after Ctrl-C: exit %d\n%s", cmd.ProcessState.ExitCode(), text)
	}
	list, code := run("state", "list")
	if code != 0 {
		t.Fatalf("tofu state list: exit %d\n%s", code, list)
	}
	inState := strings.Count(list, "gpuslice_")
	plan, code := run("plan", "-detailed-exitcode", "-input=false", "-no-color")
	want := fmt.Sprintf("Plan: %d to add, 0 to change, 0 to destroy.", n+2-inState)
	if code != 2 || !strings.Contains(plan, want) {
		t.Fatalf("plan after Ctrl-C with %d resources in state: exit %d, want %q\n%s\napply:\n%s", inState, code, want, plan, text)
	}
	t.Logf("interrupted with %d of %d resources created; %s", inState, n+2, regexp.MustCompile(`Plan: .*`).FindString(plan))
	if out, code := run("apply", "-auto-approve", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("apply after Ctrl-C: exit %d\n%s", code, out)
	}
	if out, code := run("plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("plan after finishing: exit %d\n%s", code, out)
	}
	if out, code := run("destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("destroy: exit %d\n%s", code, out)
	}
}
