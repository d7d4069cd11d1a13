package nodes

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// faultCase is one fault under one kind of slice on a real node with two
// GPUs.
type faultCase struct {
	gpus string   // the node's simulated GPUs, two of them
	args []string // more node plugin flags (--health-recovery is 20s)
	pkg  *spec.Package
	// request is the claim request the pods' container asks for ("": the
	// whole claim, as the engine's workloads ask).
	request string
	// fault is the fault log line (with the GPU's index for %d), heal the
	// line that ends it ("" for a fault that is a single event).
	fault, heal string
	// reason is the taint's value, message a part of the health message
	// the kubelet shows.
	reason, message string
	// devices is how many devices the failing GPU publishes, others how
	// many slices of pkg the other GPU has room for.
	devices, others int
}

// run puts a pod of the package on the node and faults its GPU: every
// device of that GPU is tainted (no other), the kubelet shows the pod's
// device Unhealthy with the reason, new pods fill the other GPU and one
// more waits though the failing GPU has room; after recovery the taint
// goes, the pod's device is Healthy and the waiting pod lands there. It
// logs how long each step took from the fault line being written.
func (c faultCase) run(t *testing.T, node, ns string) {
	h := startHealthNode(t, node, ns, c.gpus, append([]string{"--health-recovery=20s"}, c.args...)...)
	tmpl := h.template(c.pkg)

	a := h.run("a", tmpl, c.request)
	claim, bad := h.allocated(a)
	h.waitRunning(a)
	h.waitPodHealth(a, claim, corev1.ResourceHealthStatusHealthy)

	injected := h.inject(fmt.Sprintf(c.fault, bad))
	tainted := h.waitTaints(bad, c.reason, c.devices)
	t.Logf("timing: %q: GPU %d's devices %v tainted %v after the fault line was written", fmt.Sprintf(c.fault, bad), bad, tainted, since(injected))
	shown := h.waitPodHealth(a, claim, corev1.ResourceHealthStatusUnhealthy, c.reason, c.message)
	t.Logf("timing: pod a's status shows its device Unhealthy %v after the fault line was written: %s", since(injected), shown)

	for i := 1; i <= c.others; i++ {
		p := h.run(fmt.Sprintf("b%d", i), tmpl, c.request)
		if _, g := h.allocated(p); g == bad {
			t.Fatalf("pod %s got a slice of the tainted GPU %d", p.Name, g)
		}
	}
	waiting := h.run(fmt.Sprintf("b%d", c.others+1), tmpl, c.request)
	h.waitUnschedulable(waiting)

	quiet, from := injected, "the fault line was written"
	if c.heal != "" {
		quiet, from = h.inject(fmt.Sprintf(c.heal, bad)), fmt.Sprintf("%q was written", fmt.Sprintf(c.heal, bad))
	}
	h.waitTaints(bad, "", 0)
	t.Logf("timing: GPU %d untainted %v after %s (--health-recovery=20s)", bad, since(quiet), from)
	h.waitPodHealth(a, claim, corev1.ResourceHealthStatusHealthy)
	t.Logf("timing: pod a's status shows its device Healthy again %v after %s", since(quiet), from)
	if _, g := h.allocated(waiting); g != bad {
		t.Fatalf("pod %s got GPU %d after GPU %d recovered, want GPU %d (the only room)", waiting.Name, g, bad, bad)
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }
