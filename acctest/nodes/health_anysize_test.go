package nodes

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// The same for an any-size package (16 GiB/50 %) and a GPU that falls off
// the bus: on a real node with two simulated V100s the GPU of a running
// any-size pod stops answering NVML; the plugin's next reading taints that
// GPU's devices, and the kubelet shows the pod's device Unhealthy; two new
// 16 GiB pods fill the other GPU and a third waits, though the lost GPU has
// room; once the GPU is back and quiet for --health-recovery the taint
// goes, the third lands there and the running pod's device is Healthy again.
func TestLostGPUTaintsAnySizeOnRealNode(t *testing.T) {
	h := startHealthNode(t, "real-health-any", "health-any", "v100-32gb:2", "--health-recovery=20s", "--any-size=true")
	half := h.template(&spec.Package{Name: "health-v100-16gi", GPUModel: simulate.V100PCIe32GB.Name, Memory: "16Gi", ComputeShare: 50, MemoryBytes: 16 << 30})

	a := h.run("a", half)
	claim, bad := h.allocated(a)
	h.waitRunning(a)
	h.waitPodHealth(a, claim, corev1.ResourceHealthStatusHealthy)

	injected := h.inject(fmt.Sprintf("lost %d", bad))
	// 4 quarters, 2 halves, the whole GPU and the any-size device.
	h.waitTaints(bad, "gpu-lost", 8)
	t.Logf("timing: GPU %d lost: its 8 devices tainted %v after the fault line was written (found by the plugin's 5 s reading)", bad, time.Since(injected).Round(time.Millisecond))
	shown := h.waitPodHealth(a, claim, corev1.ResourceHealthStatusUnhealthy, "gpu-lost", "fell off the bus")
	t.Logf("timing: pod a's status shows its any-size device Unhealthy %v after the fault line was written: %s", time.Since(injected).Round(time.Millisecond), shown)

	for i := 1; i <= 2; i++ {
		p := h.run(fmt.Sprintf("b%d", i), half)
		if _, g := h.allocated(p); g == bad {
			t.Fatalf("pod %s got an any-size slice of the lost GPU %d", p.Name, g)
		}
	}
	third := h.run("b3", half)
	h.waitUnschedulable(third)

	found := h.inject(fmt.Sprintf("found %d", bad))
	h.waitTaints(bad, "", 0)
	t.Logf("timing: GPU %d untainted %v after it answered again (--health-recovery=20s)", bad, time.Since(found).Round(time.Millisecond))
	h.waitPodHealth(a, claim, corev1.ResourceHealthStatusHealthy)
	t.Logf("timing: pod a's status shows its any-size device Healthy again %v after the GPU answered again", time.Since(found).Round(time.Millisecond))
	if _, g := h.allocated(third); g != bad {
		t.Fatalf("pod b3 got GPU %d after GPU %d recovered, want GPU %d (the only room)", g, bad, bad)
	}
}
