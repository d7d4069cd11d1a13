package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestUnhealthyGPUEvicts: with --health-evict-after, a GPU still unhealthy
// that long after its fault has its devices' taint turned NoExecute, and
// kube-controller-manager's device taint eviction controller deletes the
// pod using it; the pod on the healthy GPU stays. An operator's clear on
// the Node untaints the GPU at once, long before the recovery time; a
// clear written before a later fault does not hide that fault.
func TestUnhealthyGPUEvicts(t *testing.T) {
	node := "evict-node"
	e := newEnv(t, node)
	cfg := pluginConfig(e.client, node, filepath.Join(t.TempDir(), node), 2)
	cfg.HealthRecovery = time.Hour
	cfg.HealthEvictAfter = 2 * time.Second
	p, err := driver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	e.waitSlices(node, 14)
	whole := e.class(100)
	clA, _ := e.placement("a", e.runPod("a", whole, node), true)
	clB, _ := e.placement("b", e.runPod("b", whole, node), true)
	bad, good := 0, 1
	if strings.HasPrefix(allocated(clA), "gpu-1-") {
		bad, good = 1, 0
	}
	if !strings.HasPrefix(allocated(clB), fmt.Sprintf("gpu-%d-", good)) {
		t.Fatalf("pods a and b got %s and %s, want one GPU each", allocated(clA), allocated(clB))
	}
	s := cfg.NVML.(*server.Server)

	injected := time.Now()
	if n, err := simulate.InjectXID(s, bad, 79); err != nil || n != 1 {
		t.Fatalf("inject XID 79: reached %d event sets, %v", n, err)
	}
	e.waitTaints(node, bad, "xid-79")
	t.Logf("XID -> NoSchedule: %v", time.Since(injected).Round(time.Millisecond))
	e.waitTaintEffect(node, bad, "xid-79", resourcev1.DeviceTaintEffectNoExecute)
	noExecute := time.Since(injected)
	if noExecute < cfg.HealthEvictAfter {
		t.Fatalf("taint NoExecute %v after the XID, before --health-evict-after=%v", noExecute, cfg.HealthEvictAfter)
	}
	t.Logf("XID -> NoExecute: %v (--health-evict-after=%v)", noExecute.Round(time.Millisecond), cfg.HealthEvictAfter)
	e.waitGone("a")
	t.Logf("XID -> pod a deleted: %v", time.Since(injected).Round(time.Millisecond))
	if po, err := e.client.CoreV1().Pods(e.ns).Get(e.ctx, "b", metav1.GetOptions{}); err != nil || po.DeletionTimestamp != nil {
		t.Fatalf("pod b on the healthy GPU %d was evicted too (%v)", good, err)
	}

	uuids := p.GPUs()
	cleared := time.Now()
	e.annotateNode(node, map[string]string{contract.HealthClearedAnnotation(uuids[bad].UUID): cleared.Format(time.RFC3339Nano)})
	e.waitTaints(node, bad, "")
	t.Logf("clear -> untainted: %v (--health-recovery=%v)", time.Since(cleared).Round(time.Millisecond), cfg.HealthRecovery)

	// A new fault on each GPU; one Node update brings the old clear of the
	// first again and a new clear of the second: the second is untainted,
	// the first stays (its fault came after its clear).
	if n, err := simulate.InjectXID(s, bad, 48); err != nil || n != 1 {
		t.Fatalf("inject XID 48: reached %d event sets, %v", n, err)
	}
	e.waitGPUTaint(node, bad, "xid-48")
	if n, err := simulate.InjectXID(s, good, 79); err != nil || n != 1 {
		t.Fatalf("inject XID 79: reached %d event sets, %v", n, err)
	}
	e.waitGPUTaint(node, good, "xid-79")
	e.annotateNode(node, map[string]string{contract.HealthClearedAnnotation(uuids[good].UUID): time.Now().Format(time.RFC3339Nano), "test/touch": "1"})
	e.waitGPUTaint(node, good, "")
	e.waitGPUTaint(node, bad, "xid-48")
}

// waitGPUTaint waits until every published device of GPU gpu on node has
// the unhealthy taint with value reason, of either effect ("": none).
func (e *env) waitGPUTaint(node string, gpu int, reason string) {
	e.t.Helper()
	var bad string
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := e.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err
		}
		for _, sl := range list.Items {
			for _, d := range sl.Spec.Devices {
				if *d.Attributes[contract.AttrIndex].IntValue != int64(gpu) {
					continue
				}
				ok := len(d.Taints) == 0
				if reason != "" {
					ok = len(d.Taints) == 1 && d.Taints[0].Key == contract.TaintUnhealthy && d.Taints[0].Value == reason
				}
				if !ok {
					bad = fmt.Sprintf("%s: %v", d.Name, d.Taints)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("node %s: GPU %d's devices tainted %q: %v (device %s)", node, gpu, reason, err, bad)
	}
}

// annotateNode merges annotations into the Node, as an operator would.
func (e *env) annotateNode(node string, annotations map[string]string) {
	e.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.client.CoreV1().Nodes().Patch(e.ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("annotate node %s: %v", node, err)
	}
}

// waitGone waits until the pod is deleted or being deleted.
func (e *env) waitGone(pod string) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		po, err := e.client.CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && po.DeletionTimestamp != nil, err
	})
	if err != nil {
		e.t.Fatalf("pod %s not evicted: %v", pod, err)
	}
}
