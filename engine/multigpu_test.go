package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/internal/cluster"
)

// quadHCL is a whole-GPU package of a model only quad-node publishes, a
// quota granting grant of them, and the workloads.
func quadHCL(grant int, workloads string) string {
	return fmt.Sprintf(`
resource "gpuslice_package" "h100" {
  name      = "quad-h100"
  gpu_model = "NVIDIA H100 80GB HBM3"
  fraction  = 100
}
resource "gpuslice_quota" "q" {
  namespace       = "quad"
  slices          = { (gpuslice_package.h100.name) = %d }
  cpu_requests    = "8"
  memory_requests = "8Gi"
}
`, grant) + workloads
}

func gpuWorkloadHCL(name string, gpus int, waitFor string) string {
	return fmt.Sprintf(`
resource "gpuslice_workload" %[1]q {
  namespace    = gpuslice_quota.q.namespace
  name         = %[1]q
  package      = gpuslice_package.h100.name
  gpus_per_pod = %[2]d
  wait_for     = %[3]q
  timeout      = "60s"
  container {
    image          = "nvidia/cuda:12.6.3-runtime-ubuntu22.04"
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`, name, gpus, waitFor)
}

// pollStatus polls the workload's diagnosis until ok holds.
func pollStatus(t *testing.T, e *engine.Engine, s *spec.Stack, addr string, ok func(status.Status) bool) status.Status {
	t.Helper()
	var last status.Status
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		all, err := e.Status(ctx, s)
		if err != nil {
			return false, err
		}
		last = all[addr]
		return ok(last), nil
	})
	if err != nil {
		t.Fatalf("%s: %v; last status %s (%s) %q", addr, err, last.Phase, last.Reason, last.Message)
	}
	return last
}

// TestFourGPUPod: on a node publishing four whole GPUs, a pod of
// gpus_per_pod = 4 gets one claim of four devices on four different GPUs
// from the real scheduler; with one GPU taken it waits and says why; a
// quota granting three fails the plan.
func TestFourGPUPod(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	const node = "quad-node"
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: node}); err != nil {
		t.Fatal(err)
	}
	gpu := &draproof.Proof{Client: c.Client(), Node: node, Model: "NVIDIA H100 80GB HBM3"}
	if _, err := gpu.PublishGPUs(ctx, 4, 100); err != nil {
		t.Fatal(err)
	}

	// Three granted: the claim of four could never be made.
	p, err := e.Plan(ctx, loadStack(t, "quad", quadHCL(3, gpuWorkloadHCL("quad", 4, "scheduled"))), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := errorsOf(p.Diagnostics); len(got) != 1 || !strings.Contains(got[0], "gpuslice_workload.quad.gpus_per_pod: More GPUs per pod than granted: "+
		"each pod's claim asks for 4 quad-h100 slices but ResourceQuota gpuslice in quad grants 3") {
		t.Fatalf("plan errors = %q", got)
	}

	// One GPU taken by another workload: three free, the pod waits.
	s := loadStack(t, "quad", quadHCL(5, gpuWorkloadHCL("one", 1, "scheduled")))
	mustApply(t, e, s)
	pollStatus(t, e, s, "gpuslice_workload.one", func(st status.Status) bool { return st.Reason == status.Scheduled })
	s = loadStack(t, "quad", quadHCL(5, gpuWorkloadHCL("one", 1, "scheduled")+gpuWorkloadHCL("quad", 4, "none")))
	p = mustPlan(t, e, s)
	if got := warningsOf(p.Diagnostics); !contains(got, "gpuslice_workload.quad.gpus_per_pod: Not enough free GPUs on one node now: "+
		"each pod needs 4 free quad-h100 slices on one node; 0 of the 1 pods fit the free slices now (3 free in the cluster)") {
		t.Errorf("plan warnings = %q", got)
	}
	if err := e.Apply(ctx, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	waiting := pollStatus(t, e, s, "gpuslice_workload.quad", func(st status.Status) bool { return st.Reason == status.WaitingForSlice })
	if !strings.Contains(waiting.Message, "needs 4 free quad-h100 slices on one node and no node has them") || waiting.Phase != status.Pending {
		t.Errorf("waiting quad: %s %q", waiting.Phase, waiting.Message)
	}

	// The other workload goes (its pod is forced off: no kubelet runs on
	// the simulated node), and the four GPUs go to the one claim.
	s = loadStack(t, "quad", quadHCL(5, gpuWorkloadHCL("quad", 4, "none")))
	if err := e.Apply(ctx, mustPlan(t, e, s), apply.Options{}); err != nil {
		t.Fatal(err)
	}
	forceDeletePods(t, c, "quad", "one")
	st := pollStatus(t, e, s, "gpuslice_workload.quad", func(st status.Status) bool { return st.Reason == status.Scheduled })
	claim, err := c.Client().ResourceV1().ResourceClaims("quad").Get(ctx, st.Claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpus := map[string]bool{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		gpus[strings.SplitN(r.Device, "-", 3)[0]+"-"+strings.SplitN(r.Device, "-", 3)[1]] = true
	}
	if n := len(claim.Status.Allocation.Devices.Results); n != 4 || len(gpus) != 4 {
		t.Fatalf("claim %s allocated %d devices on GPUs %v, want 4 on 4 different GPUs: %+v", claim.Name, n, gpus, claim.Status.Allocation.Devices.Results)
	}
	if st.Node != node || strings.Count(st.Device, ",") != 3 {
		t.Errorf("status node %q device %q, want %s and four devices", st.Node, st.Device, node)
	}
	requireNoChanges(t, e, s)

	// Claim templates are immutable: two GPUs per pod is a new template,
	// and the one of four is pruned.
	s = loadStack(t, "quad", quadHCL(5, gpuWorkloadHCL("quad", 2, "none")))
	if err := e.Apply(ctx, mustPlan(t, e, s), apply.Options{}); err != nil {
		t.Fatal(err)
	}
	templates, err := c.Client().ResourceV1().ResourceClaimTemplates("quad").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tpl := range templates.Items {
		names = append(names, fmt.Sprintf("%s=%d", tpl.Name, tpl.Spec.Spec.Devices.Requests[0].Exactly.Count))
	}
	if strings.Join(names, " ") != "quad-quad-h100-x2=2" {
		t.Errorf("claim templates after gpus_per_pod 4 → 2: %v, want only quad-quad-h100-x2 asking for 2", names)
	}
}

// forceDeletePods deletes a workload's pods at once, as a kubelet that
// stopped them would let the API server do.
func forceDeletePods(t *testing.T, c *cluster.Cluster, ns, workload string) {
	t.Helper()
	pods := c.Client().CoreV1().Pods(ns)
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: objects.LabelWorkload + "=" + workload})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			_ = pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("pods of %s/%s still there: %v", ns, workload, err)
	}
}

func errorsOf(ds diag.Diagnostics) []string   { return severityOf(ds, diag.Error) }
func warningsOf(ds diag.Diagnostics) []string { return severityOf(ds, diag.Warning) }

func severityOf(ds diag.Diagnostics, sev diag.Severity) []string {
	var out []string
	for _, d := range ds {
		if d.Severity == sev {
			out = append(out, fmt.Sprintf("%s.%s: %s: %s", d.Address, d.Attribute, d.Summary, d.Detail))
		}
	}
	return out
}

func contains(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
