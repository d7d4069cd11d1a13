package nodes

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// An XID written to the simulated driver's fault log on a real node (kubelet,
// containerd, runc, two simulated V100s offering partitions, an any-size and
// a time-sliced device each) taints every device of the GPU with the running
// pod, and the kubelet shows that pod's device Unhealthy, naming the XID;
// four new 25 % pods all land on the other GPU and a fifth waits, though the
// failing GPU has room; once the GPU is quiet for --health-recovery the taint
// goes, the fifth pod lands there and the running pod's device is Healthy
// again.
func TestXIDTaintsGPUOnRealNode(t *testing.T) {
	h := startHealthNode(t, "real-health", "health", "v100-32gb:2", "--health-recovery=20s", "--any-size=true", "--time-slicing=true")
	quarter := h.template(&spec.Package{Name: "health-v100-25pct", GPUModel: simulate.V100PCIe32GB.Name, Fraction: 25})

	a := h.run("a", quarter)
	claim, bad := h.allocated(a)
	h.waitRunning(a)
	h.waitPodHealth(a, claim, corev1.ResourceHealthStatusHealthy)

	injected := h.inject(fmt.Sprintf("xid %d 79", bad))
	// 4 quarters, 2 halves, the whole GPU, the any-size and the time-sliced device.
	h.waitTaints(bad, "xid-79", 9)
	t.Logf("timing: XID 79 on GPU %d: its 9 devices tainted %v after the fault line was written", bad, time.Since(injected).Round(time.Millisecond))
	shown := h.waitPodHealth(a, claim, corev1.ResourceHealthStatusUnhealthy, "xid-79", "critical XID 79")
	t.Logf("timing: pod a's status shows its device Unhealthy %v after the fault line was written: %s", time.Since(injected).Round(time.Millisecond), shown)

	for i := 1; i <= 4; i++ {
		p := h.run(fmt.Sprintf("b%d", i), quarter)
		if _, g := h.allocated(p); g == bad {
			t.Fatalf("pod %s got a slice of the tainted GPU %d", p.Name, g)
		}
	}
	fifth := h.run("b5", quarter)
	h.waitUnschedulable(fifth)

	h.waitTaints(bad, "", 0)
	t.Logf("timing: GPU %d untainted %v after the fault line was written (--health-recovery=20s)", bad, time.Since(injected).Round(time.Millisecond))
	h.waitPodHealth(a, claim, corev1.ResourceHealthStatusHealthy)
	t.Logf("timing: pod a's status shows its device Healthy again %v after the fault line was written", time.Since(injected).Round(time.Millisecond))
	if _, g := h.allocated(fifth); g != bad {
		t.Fatalf("pod b5 got GPU %d after GPU %d recovered, want GPU %d (the only room)", g, bad, bad)
	}
}
