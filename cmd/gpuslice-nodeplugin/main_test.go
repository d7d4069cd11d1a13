package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/freeport"
	"github.com/gpuslice/gpuslice/internal/gobuild"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gpuslice-nodeplugin")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = gobuild.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func dirFlags(dir string) []string {
	var out []string
	for flag, sub := range map[string]string{"plugin-dir": "plugin", "registrar-dir": "registry", "cdi-dir": "cdi", "state-dir": "state", "accounting-dir": "accounting", "shim-dir": "shim"} {
		out = append(out, "--"+flag, filepath.Join(dir, sub))
	}
	return out
}

// TestSimulatedNode runs the command as a DaemonSet would, on a simulated
// node of the local control plane: it publishes the slices of two V100s,
// serves DCGM-style metrics, taints a GPU's devices on an XID written to
// the simulated driver's fault log and untaints them after
// --health-recovery, and stops cleanly on SIGTERM.
func TestSimulatedNode(t *testing.T) {
	c := clustertest.Start(t, cluster.Options{})
	ctx := context.Background()
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: "cmd-node"}); err != nil {
		t.Fatal(err)
	}
	bin := build(t)
	dir := t.TempDir()
	shimLib := filepath.Join(dir, "libgpuslice.so")
	writeFile(t, shimLib, "stand-in")
	addr := freeAddr(t)
	cmd := exec.Command(bin, append(dirFlags(dir), "--node-name", "cmd-node", "--kubeconfig", c.KubeconfigPath,
		"--simulate", "v100-sxm2-32gb:2", "--shim-library", shimLib, "--metrics-address", addr, "--health-recovery", "3s")...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := c.Client().ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=cmd-node"})
		n := 0
		for _, s := range list.Items {
			n += len(s.Spec.Devices)
		}
		return n == 14 && len(list.Items) == 4, err
	})
	if err != nil {
		t.Fatalf("slices of two GPUs not published: %v\n%s", err, out)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`DCGM_FI_DEV_GPU_TEMP{Hostname="cmd-node",UUID="GPU-`, `modelName="Tesla V100-SXM2-32GB"`, "gpuslice_gpus_published 2", "gpuslice_prepared_claims 0"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	faults, err := os.OpenFile(simulate.FaultFile(filepath.Join(dir, "state")), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("the simulated driver's fault log: %v", err)
	}
	_, err = faults.WriteString("xid 1 79\n")
	faults.Close()
	if err != nil {
		t.Fatal(err)
	}
	// tainted: GPU 1's 7 devices, then none
	for _, want := range []int{7, 0} {
		var tainted int
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := c.Client().ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=cmd-node"})
			tainted = 0
			for _, s := range list.Items {
				for _, d := range s.Spec.Devices {
					if len(d.Taints) == 1 && d.Taints[0].Key == contract.TaintUnhealthy && d.Taints[0].Value == "xid-79" && *d.Attributes[contract.AttrIndex].IntValue == 1 {
						tainted++
					} else if len(d.Taints) > 0 {
						return false, fmt.Errorf("device %s: taints %v", d.Name, d.Taints)
					}
				}
			}
			return tainted == want, err
		})
		if err != nil {
			t.Fatalf("%d devices tainted xid-79, want %d: %v\n%s", tainted, want, err, out)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, out)
	}
}

// TestBadFlags: mistakes are named with the flag to fix, before anything
// touches the node.
func TestBadFlags(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-name", "n", "--kubeconfig", "/nonexistent", "--fractions", "30"}, "--fractions: fraction \"30\""},
		{[]string{"--node-name", "n", "--kubeconfig", "/nonexistent"}, "--kubeconfig /nonexistent"},
		{[]string{"--node-name", "n", "--kubeconfig", writeKubeconfig(t, dir), "--simulate", "a100:2"}, "unknown GPU profile \"a100\""},
		{[]string{"--node-name", "n", "--kubeconfig", writeKubeconfig(t, dir), "--nvml-library", "/nonexistent/libnvidia-ml.so.1"}, "use --simulate"},
		{[]string{"--kubeconfig", writeKubeconfig(t, dir), "--simulate", "v100-32gb:1"}, "--node-name (or NODE_NAME) is required"},
	} {
		cmd := exec.Command(bin, append(dirFlags(dir), tc.args...)...)
		cmd.Env = append(os.Environ(), "NODE_NAME=") // --node-name defaults to it
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v\n%s\nwant an error containing %q", tc.args, err, out, tc.want)
		}
	}
}

func writeKubeconfig(t *testing.T, dir string) string {
	p := filepath.Join(dir, "kubeconfig")
	writeFile(t, p, "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n")
	return p
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func freeAddr(t *testing.T) string {
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
