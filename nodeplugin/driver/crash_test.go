package driver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/kubeletsim"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// child is the plugin running as a separate process (this test binary).
type child struct {
	t   *testing.T
	cmd *exec.Cmd
	out *strings.Builder
}

func startChild(t *testing.T, e *env, cc childConfig) *child {
	t.Helper()
	_ = os.Remove(filepath.Join(cc.Dir, "ready"))
	cc.Kubeconfig = e.c.KubeconfigPath
	raw, _ := json.Marshal(cc)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &child{t: t, cmd: cmd, out: out}
	t.Cleanup(func() { ch.stop() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(cc.Dir, "ready"))
		if err == nil && string(b) == fmt.Sprint(cmd.Process.Pid) {
			return ch
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin process did not start:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits for the child to exit and returns how.
func (c *child) wait() error { return c.cmd.Wait() }

func (c *child) stop() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		_ = c.cmd.Wait()
	}
}

// TestCrashAtEachStep kills the plugin with SIGKILL right after each step
// of a prepare of a 25 % slice, restarts it, and checks the retried prepare
// converges: one spec, one accounting region, the checkpoint completed, and
// unprepare leaves nothing behind.
func TestCrashAtEachStep(t *testing.T) { crashAtEachStep(t, "crash-node", 1, 25, 1) }

// TestCrashAtEachStepMultiGPU: the same for a claim of two whole GPUs.
func TestCrashAtEachStepMultiGPU(t *testing.T) { crashAtEachStep(t, "crash-multi-node", 2, 100, 2) }

// crashAtEachStep runs the crash test on a node with gpus GPUs for claims
// of count devices of the fraction's class.
func crashAtEachStep(t *testing.T, node string, gpus, fraction int, count int64) {
	e := newEnv(t, node)
	dir := filepath.Join(t.TempDir(), node)
	cfg := pluginConfig(e.client, node, dir, gpus)
	first := startChild(t, e, childConfig{Node: node, Dir: dir, GPUs: gpus})
	e.waitSlices(node, 7*gpus)
	first.stop()
	class := e.class(fraction)

	for i, step := range driver.Steps {
		t.Run(string(step), func(t *testing.T) {
			pod := fmt.Sprintf("crash-%d", i)
			claimName := e.runPodN(pod, class, node, count)
			claim, _ := e.placement(pod, claimName, true)

			victim := startChild(t, e, childConfig{Node: node, Dir: dir, GPUs: gpus, KillAt: step})
			prepare(t, e, cfg, claim) // the plugin dies in the middle
			err := victim.wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("plugin was to die by SIGKILL after %s; it exited with %v\n%s", step, err, victim.out)
			}

			restarted := startChild(t, e, childConfig{Node: node, Dir: dir, GPUs: gpus})
			ids, err := prepare(t, e, cfg, claim)
			if err != nil {
				t.Fatalf("prepare after restart: %v\n%s", err, restarted.out)
			}
			uid := string(claim.UID)
			// one answer per device, each the claim's one CDI device
			if got := ids[uid]; int64(len(got)) != count || slices.ContainsFunc(got, func(id string) bool { return id != cdispec.DeviceID(uid) }) {
				t.Fatalf("prepare after restart returned %v", ids)
			}
			assertPreparedOnly(t, cfg, uid)

			k, err := kubeletsim.Dial(cfg.SocketPath())
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			if err := k.Unprepare(e.ctx, claim); err != nil {
				t.Fatal(err)
			}
			assertNothingLeft(t, cfg.CDIDir, cfg.AccountingRoot)
			restarted.stop()
			if err := e.client.CoreV1().Pods(e.ns).Delete(e.ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCrashDuringUnprepare kills the plugin after it removed a claim's
// files but before its checkpoint forgot the claim: the restarted plugin
// still holds the claim (its spec restored), and the kubelet's retried
// unprepare leaves nothing behind.
func TestCrashDuringUnprepare(t *testing.T) {
	node := "crash-unprepare-node"
	e := newEnv(t, node)
	dir := filepath.Join(t.TempDir(), node)
	cfg := pluginConfig(e.client, node, dir, 1)
	victim := startChild(t, e, childConfig{Node: node, Dir: dir, GPUs: 1, KillAt: driver.StepUnprepareRemoved})
	e.waitSlices(node, 7)
	claim, _ := e.placement("app", e.runPod("app", e.class(25), node), true)
	if _, err := prepare(t, e, cfg, claim); err != nil {
		t.Fatal(err)
	}
	k, _ := dialKubelet(t, cfg)
	if err := k.Unprepare(e.ctx, claim); err == nil {
		t.Fatal("unprepare succeeded; the plugin was to die in the middle")
	}
	if err := victim.wait(); err == nil {
		t.Fatalf("plugin did not die:\n%s", victim.out)
	}
	restarted := startChild(t, e, childConfig{Node: node, Dir: dir, GPUs: 1})
	assertPreparedOnly(t, cfg, string(claim.UID))
	k2, _ := dialKubelet(t, cfg)
	if err := k2.Unprepare(e.ctx, claim); err != nil {
		t.Fatalf("retried unprepare: %v\n%s", err, restarted.out)
	}
	assertNothingLeft(t, cfg.CDIDir, cfg.AccountingRoot)
	cp, err := mustCheckpoint(t, cfg.StateDir).Load()
	if err != nil || len(cp.Claims) != 0 {
		t.Errorf("checkpoint after unprepare: %+v, %v", cp, err)
	}
}

func prepare(t *testing.T, e *env, cfg driver.Config, claim *resourcev1.ResourceClaim) (map[string][]string, error) {
	t.Helper()
	k, err := kubeletsim.Dial(cfg.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	return k.Prepare(e.ctx, claim)
}

// assertPreparedOnly checks the node holds exactly the claim's spec and
// accounting dir, and the checkpoint exactly its completed entry.
func assertPreparedOnly(t *testing.T, cfg driver.Config, uid string) {
	t.Helper()
	specs, _ := os.ReadDir(cfg.CDIDir)
	if len(specs) != 1 || specs[0].Name() != cdispec.SpecName(uid) {
		t.Errorf("CDI dir holds %v, want only %s", names(specs), cdispec.SpecName(uid))
	}
	dirs, _ := os.ReadDir(cfg.AccountingRoot)
	if len(dirs) != 1 || dirs[0].Name() != uid {
		t.Errorf("accounting root holds %v, want only %s", names(dirs), uid)
	}
	if _, err := accounting.ReadFile(filepath.Join(cfg.AccountingRoot, uid, contract.RegionFile)); err != nil {
		t.Errorf("accounting region: %v", err)
	}
	cp, err := mustCheckpoint(t, cfg.StateDir).Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Claims) != 1 || cp.Claims[uid].State != checkpoint.PrepareCompleted {
		t.Errorf("checkpoint holds %+v, want only %s completed", cp.Claims, uid)
	}
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func dialKubelet(t *testing.T, cfg driver.Config) (*kubeletsim.Client, error) {
	t.Helper()
	k, err := kubeletsim.Dial(cfg.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k, nil
}
