package devcluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/devcluster"
	"github.com/gpuslice/gpuslice/internal/gobuild"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// TestUpEnvDown drives the real `gpuslice dev` commands as a person would
// and checks nothing is left running afterwards.
func TestUpEnvDown(t *testing.T) {
	realnodetest.Require(t)
	// Both commands as `make build` puts them: `gpuslice dev` runs the
	// gpuslice-dev beside it.
	binDir := t.TempDir()
	gpuslice := filepath.Join(binDir, "gpuslice")
	for _, cmd := range []string{"gpuslice", "gpuslice-dev"} {
		build := exec.Command("go", "build", "-o", filepath.Join(binDir, cmd), "github.com/gpuslice/gpuslice/cmd/"+cmd)
		build.Env = gobuild.Env() // gpuslice-dev runs node plugins: go-nvml
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
	dir := filepath.Join(t.TempDir(), "dev")
	run := func(args ...string) (string, error) {
		out, err := exec.Command(gpuslice, append(args, "--dir", dir)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { _, _ = run("dev", "down") })

	out, err := run("dev", "up", "--real-nodes", "1", "--nodes", "1")
	if err != nil {
		t.Fatalf("dev up: %v\n%s", err, out)
	}
	kubeconfigLine := "export KUBECONFIG=" + filepath.Join(dir, "cluster", "kubeconfig")
	if !strings.Contains(out, kubeconfigLine) {
		t.Fatalf("dev up printed %q, want the line %q", out, kubeconfigLine)
	}
	state, err := devcluster.Running(dir)
	if err != nil {
		t.Fatal(err)
	}

	// A second `up` finds the running cluster instead of starting another.
	out, err = run("dev", "up")
	if err != nil || !strings.Contains(out, "already running") {
		t.Fatalf("second dev up: %v\n%s", err, out)
	}
	out, err = run("dev", "env")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// The plugin's image is the one `make image` built, digest and all.
	built, err2 := images.BuiltNodePluginImage(filepath.Join(cluster.FindBinDir(), "image", "oci"))
	if err2 != nil {
		t.Fatal(err2)
	}
	digest, err2 := built.Digest()
	if err2 != nil {
		t.Fatal(err2)
	}
	if err != nil || lines[0] != kubeconfigLine || !strings.Contains(out, "export TF_VAR_node_plugin_image=registry.gpuslice.test/gpuslice/gpuslice-nodeplugin:0.1.0@"+digest.String()) {
		t.Fatalf("dev env: %v: %q, want the KUBECONFIG line and the node plugin's variables, its image at %s", err, out, digest)
	}

	// The real node runs its node plugin once a platform installs it, from
	// the image in the local registry, with the variables dev env printed.
	env := []string{"KUBECONFIG=" + state.Kubeconfig}
	for _, l := range lines[1:] {
		kv := strings.TrimPrefix(l, "export ")
		name, value, _ := strings.Cut(kv, "=")
		env = append(env, name+"="+strings.Trim(value, "'"))
	}
	platform := t.TempDir()
	if err := os.WriteFile(filepath.Join(platform, "main.tf"), []byte(platformWithNodePlugin), 0o644); err != nil {
		t.Fatal(err)
	}
	apply := exec.Command(gpuslice, "apply", platform, "-stack", "dev-platform", "-auto-approve")
	apply.Env = append(os.Environ(), env...)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("apply a platform with the node plugin: %v\n%s", err, out)
	}
	if _, err := exec.LookPath("kubectl"); err == nil {
		kc := exec.Command("kubectl", "get", "nodes", "-o", "name")
		kc.Env = append(os.Environ(), "KUBECONFIG="+state.Kubeconfig)
		if out, err := kc.CombinedOutput(); err != nil || !strings.Contains(string(out), "node/gpu-node-1") || !strings.Contains(string(out), "node/sim-node-1") {
			t.Fatalf("kubectl get nodes: %v\n%s", err, out)
		}
	}

	// The node plugin runs for the node: its slices are published and its
	// socket answers.
	if len(state.NodePlugins) != 1 || state.NodePlugins[0].Node != "sim-node-1" {
		t.Fatalf("state lists node plugins %+v, want one for sim-node-1", state.NodePlugins)
	}
	if len(state.RealNodes) != 1 || state.RealNodes[0].Name != "gpu-node-1" {
		t.Fatalf("state lists real nodes %+v, want gpu-node-1", state.RealNodes)
	}
	if _, err := os.Stat(state.NodePlugins[0].Socket); err != nil {
		t.Errorf("node plugin socket: %v", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", state.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rc)
	for _, node := range []string{"gpu-node-1", "sim-node-1"} {
		devices := 0
		// publishing is asynchronous: allow the slice controller a moment
		_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			devices = 0
			if err == nil {
				for _, s := range slices.Items {
					devices += len(s.Spec.Devices)
				}
			}
			return devices == 7, nil
		})
		if devices != 7 {
			t.Errorf("%s publishes %d devices, want 7 (one V100 as 4×25 %%, 2×50 %%, 1×100 %%)", node, devices)
		}
	}

	children := childPIDs(t, state.PID)
	if len(children) != 7 {
		t.Errorf("server %d has %d child processes, want 7 (etcd, three kube components; the real node's containerd, kubelet and reaper: its node plugin is a pod)", state.PID, len(children))
	}
	out, err = run("dev", "down")
	if err != nil || !strings.Contains(out, "dev cluster stopped") {
		t.Fatalf("dev down: %v\n%s", err, out)
	}
	for _, pid := range append(children, state.PID) {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still running after dev down", pid)
		}
	}
	// Nothing of the real node is left: no cgroup, no bridge.
	real := state.RealNodes[0]
	for _, leftover := range []string{filepath.Join("/sys/fs/cgroup/memory", real.Cgroup), filepath.Join("/sys/class/net", real.Bridge)} {
		if _, err := os.Stat(leftover); err == nil {
			t.Errorf("%s is left after dev down", leftover)
		}
	}
	if out, err := run("dev", "env"); err == nil || !strings.Contains(out, "gpuslice dev up") {
		t.Errorf("dev env after down: err %v, output %q: want an error saying to run `gpuslice dev up`", err, out)
	}
}

const platformWithNodePlugin = `
variable "node_plugin_image" { type = string }
variable "driver_root" { type = string }
variable "simulated_gpus" { type = string }
variable "node_plugin_env" { type = map(string) }

resource "gpuslice_platform" "this" {
  admission_policies = false
  node_plugin {
    image          = var.node_plugin_image
    driver_root    = var.driver_root
    simulated_gpus = var.simulated_gpus
    env            = var.node_plugin_env
  }
}
`

// childPIDs lists the direct children of pid from /proc.
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range entries {
		data, err := os.ReadFile(e)
		if err != nil {
			continue
		}
		// Format: pid (comm) state ppid ...; comm may contain spaces.
		rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
		var state string
		var ppid, child int
		if _, err := fmt.Sscan(rest, &state, &ppid); err != nil || ppid != pid {
			continue
		}
		if _, err := fmt.Sscan(filepath.Base(filepath.Dir(e)), &child); err == nil {
			kids = append(kids, child)
		}
	}
	return kids
}
