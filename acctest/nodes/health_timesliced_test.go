package nodes

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// The same for a time-sliced package (two slices per GPU), whose claims
// share one device, and a double-bit ECC error: on a real node with two
// simulated V100s an ECC error on the GPU of a running time-sliced pod
// taints that GPU's devices, and the kubelet shows the pod's shared device
// Unhealthy; two new time-sliced pods
// take the other GPU's two slices and a third waits, though the failing GPU
// has a slice free; after recovery the taint goes, the third lands there
// and the running pod's device is Healthy again.
func TestECCTaintsTimeSlicedGPUOnRealNode(t *testing.T) {
	h := startHealthNode(t, "real-health-ts", "health-ts", "v100-32gb:2", "--health-recovery=20s", "--time-slicing=true")
	shared := h.template(&spec.Package{Name: "health-v100-ts", GPUModel: simulate.V100PCIe32GB.Name, Sharing: spec.SharingTimeSliced, Replicas: 2})

	a := h.run("a", shared)
	claim, bad := h.allocated(a)
	h.waitRunning(a)
	h.waitPodHealth(a, claim, corev1.ResourceHealthStatusHealthy)

	injected := h.inject(fmt.Sprintf("ecc %d", bad))
	// 4 quarters, 2 halves, the whole GPU and the time-sliced device.
	h.waitTaints(bad, "ecc-double-bit", 8)
	t.Logf("timing: double-bit ECC error on GPU %d: its 8 devices tainted %v after the fault line was written", bad, time.Since(injected).Round(time.Millisecond))
	shown := h.waitPodHealth(a, claim, corev1.ResourceHealthStatusUnhealthy, "ecc-double-bit", "uncorrectable")
	t.Logf("timing: pod a's status shows its time-sliced device Unhealthy %v after the fault line was written: %s", time.Since(injected).Round(time.Millisecond), shown)

	for i := 1; i <= 2; i++ {
		p := h.run(fmt.Sprintf("b%d", i), shared)
		if _, g := h.allocated(p); g == bad {
			t.Fatalf("pod %s got a time-sliced slice of the tainted GPU %d", p.Name, g)
		}
	}
	third := h.run("b3", shared)
	h.waitUnschedulable(third)

	h.waitTaints(bad, "", 0)
	t.Logf("timing: GPU %d untainted %v after the fault line was written (--health-recovery=20s)", bad, time.Since(injected).Round(time.Millisecond))
	h.waitPodHealth(a, claim, corev1.ResourceHealthStatusHealthy)
	t.Logf("timing: pod a's status shows its time-sliced device Healthy again %v after the fault line was written", time.Since(injected).Round(time.Millisecond))
	if _, g := h.allocated(third); g != bad {
		t.Fatalf("pod b3 got GPU %d after GPU %d recovered, want GPU %d (the only free time-sliced slice)", g, bad, bad)
	}
}
