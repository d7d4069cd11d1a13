package driver_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/client_golang/prometheus"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/kubeletsim"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestUnhealthyGPUTainted: a critical XID on a GPU taints every device of
// it in the published slices, and the real scheduler places no new slice
// there; a claim that tolerates the taint (the tenant's own field) is
// allocated there but refused by prepare; once the GPU is quiet for the
// recovery time its devices are untainted and the waiting pod lands on it.
func TestUnhealthyGPUTainted(t *testing.T) {
	node := "taint-node"
	e := newEnv(t, node)
	cfg := pluginConfig(e.client, node, filepath.Join(t.TempDir(), node), 2)
	cfg.HealthRecovery = 2 * time.Second
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	p, err := driver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	e.waitSlices(node, 14)
	whole, half, quarter := e.class(100), e.class(50), e.class(25)

	if n, err := simulate.InjectXID(cfg.NVML.(*server.Server), 0, 79); err != nil || n != 1 {
		t.Fatalf("inject XID 79: reached %d event sets, %v", n, err)
	}
	e.waitTaints(node, 0, "xid-79")
	if got := gauge(t, reg, "gpuslice_gpu_unhealthy", map[string]string{"gpu": "0", "reason": "xid-79"}); got != 1 {
		t.Errorf("gpuslice_gpu_unhealthy{gpu=0,reason=xid-79} = %v, want 1", got)
	}
	if got := gauge(t, reg, "gpuslice_gpu_unhealthy", map[string]string{"gpu": "1", "reason": ""}); got != 0 {
		t.Errorf("gpuslice_gpu_unhealthy{gpu=1} = %v, want 0", got)
	}

	a := e.runPod("a", whole, node)
	if cl, _ := e.placement("a", a, true); allocated(cl) != "gpu-1-100pct-1" {
		t.Fatalf("pod a got %s, want GPU 1's whole slice (GPU 0 is tainted)", allocated(cl))
	}
	b := e.runPod("b", half, node)
	_, reason := e.placement("b", b, false)
	t.Logf("pod b waits: %s", reason)

	tolerating := resourcev1.ExactDeviceRequest{DeviceClassName: quarter, Count: 1, Tolerations: []resourcev1.DeviceToleration{{
		Key: contract.TaintUnhealthy, Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule,
	}}}
	c := e.runPodWith("c", node, tolerating)
	cl, _ := e.placement("c", c, true)
	if !strings.HasPrefix(allocated(cl), "gpu-0-") {
		t.Fatalf("tolerating pod c got %s, want a slice of GPU 0 (the only room)", allocated(cl))
	}
	kubelet, err := kubeletsim.Dial(cfg.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Close()
	if _, err := kubelet.Prepare(e.ctx, cl); err == nil || !strings.Contains(err.Error(), "unhealthy") || !strings.Contains(err.Error(), "xid-79") {
		t.Fatalf("prepare of a slice on the tainted GPU: %v; want it refused, naming the XID", err)
	}

	e.waitTaints(node, 0, "")
	if got := gauge(t, reg, "gpuslice_gpu_unhealthy", map[string]string{"gpu": "0", "reason": ""}); got != 0 {
		t.Errorf("gpuslice_gpu_unhealthy{gpu=0} after recovery = %v, want 0", got)
	}
	if cl, _ := e.placement("b", b, true); !strings.HasPrefix(allocated(cl), "gpu-0-50pct-") {
		t.Fatalf("pod b got %s after GPU 0 recovered, want half of GPU 0", allocated(cl))
	}
}

// waitTaints waits until every published device of GPU gpu on node has the
// unhealthy taint with value reason and effect NoSchedule ("": no taint),
// and no other GPU's device has a taint.
func (e *env) waitTaints(node string, gpu int, reason string) {
	e.t.Helper()
	e.waitTaintEffect(node, gpu, reason, resourcev1.DeviceTaintEffectNoSchedule)
}

// waitTaintEffect is waitTaints for a taint of the given effect.
func (e *env) waitTaintEffect(node string, gpu int, reason string, effect resourcev1.DeviceTaintEffect) {
	e.t.Helper()
	var bad string
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := e.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err
		}
		bad = ""
		for _, s := range list.Items {
			for _, d := range s.Spec.Devices {
				want := 0
				if reason != "" && *d.Attributes[contract.AttrIndex].IntValue == int64(gpu) {
					want = 1
				}
				ok := len(d.Taints) == want
				if ok && want == 1 {
					tt := d.Taints[0]
					ok = tt.Key == contract.TaintUnhealthy && tt.Value == reason && tt.Effect == effect && tt.TimeAdded != nil
				}
				if !ok {
					bad = d.Name
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("node %s: GPU %d's devices tainted %q (%s) and no other: %v (device %s differs)", node, gpu, reason, effect, err, bad)
	}
}

// TestUnhealthyMIGGPUTainted: a double-bit ECC error on an A100 in MIG mode
// taints each of its MIG devices and no device of the V100 beside it; the
// scheduler leaves a pod for its free instance pending, a claim allocated
// there before the error is refused by prepare, and after recovery the
// pending pod gets the instance.
func TestUnhealthyMIGGPUTainted(t *testing.T) {
	node := "mig-taint-node"
	e := newEnv(t, node)
	cfg := e.migPluginConfig(node, mixedNode)
	cfg.HealthRecovery = 2 * time.Second
	p, err := driver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	e.waitSlices(node, 2+7)
	mig := e.migClass("1g.5gb")
	before, _ := e.placement("before", e.runPod("before", mig, node), true)

	if n, err := simulate.InjectDoubleBitECC(cfg.NVML.(*server.Server), 0); err != nil || n != 1 {
		t.Fatalf("inject a double-bit ECC error: reached %d event sets, %v", n, err)
	}
	e.waitTaints(node, 0, "ecc-double-bit")
	after := e.runPod("after", mig, node)
	e.placement("after", after, false)
	kubelet, err := kubeletsim.Dial(cfg.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Close()
	if _, err := kubelet.Prepare(e.ctx, before); err == nil || !strings.Contains(err.Error(), "ecc-double-bit") {
		t.Fatalf("prepare of a MIG instance of the failing GPU: %v; want it refused, naming the error", err)
	}

	e.waitTaints(node, 0, "")
	if cl, _ := e.placement("after", after, true); !strings.HasPrefix(allocated(cl), "gpu-0-mig-1g-5gb-") {
		t.Fatalf("pod after got %s once the A100 recovered, want its free 1g.5gb instance", allocated(cl))
	}
}
