package nodes

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// The same on a real node with two simulated A100s in MIG mode (two 1g.5gb
// and a 3g.20gb instance each): an XID on the GPU of a running 1g.5gb pod
// taints its three MIG devices and none of the other GPU's, and the kubelet
// shows the pod's instance Unhealthy; two new 1g.5gb pods land on the other
// GPU and a third waits, though the failing GPU has a free instance; after
// recovery the taint goes, the third lands there and the running pod's
// instance is Healthy again.
func TestXIDTaintsMIGGPUOnRealNode(t *testing.T) {
	h := startHealthNode(t, "real-health-mig", "health-mig", "a100-40gb:2,mig=1g.5gb*2,3g.20gb", "--health-recovery=20s")
	mig := h.template(&spec.Package{Name: "health-a100-1g-5gb", GPUModel: simulate.A100SXM440GB.Name, MIGProfile: "1g.5gb"})

	a := h.run("a", mig)
	claim, bad := h.allocated(a)
	h.waitRunning(a)
	h.waitPodHealth(a, claim, corev1.ResourceHealthStatusHealthy)

	injected := h.inject(fmt.Sprintf("xid %d 48", bad))
	tainted := h.waitTaints(bad, "xid-48", 3)
	t.Logf("timing: XID 48 on A100 %d: its MIG devices %v tainted %v after the fault line was written", bad, tainted, time.Since(injected).Round(time.Millisecond))
	shown := h.waitPodHealth(a, claim, corev1.ResourceHealthStatusUnhealthy, "xid-48", "critical XID 48")
	t.Logf("timing: pod a's status shows its MIG device Unhealthy %v after the fault line was written: %s", time.Since(injected).Round(time.Millisecond), shown)

	for i := 1; i <= 2; i++ {
		p := h.run(fmt.Sprintf("b%d", i), mig)
		if _, g := h.allocated(p); g == bad {
			t.Fatalf("pod %s got a MIG instance of the tainted A100 %d", p.Name, g)
		}
	}
	third := h.run("b3", mig)
	h.waitUnschedulable(third)

	h.waitTaints(bad, "", 0)
	t.Logf("timing: A100 %d untainted %v after the fault line was written (--health-recovery=20s)", bad, time.Since(injected).Round(time.Millisecond))
	h.waitPodHealth(a, claim, corev1.ResourceHealthStatusHealthy)
	t.Logf("timing: pod a's status shows its MIG device Healthy again %v after the fault line was written", time.Since(injected).Round(time.Millisecond))
	if _, g := h.allocated(third); g != bad {
		t.Fatalf("pod b3 got A100 %d after A100 %d recovered, want A100 %d (the only free 1g.5gb)", g, bad, bad)
	}
}
