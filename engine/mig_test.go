package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/internal/simnode"
)

// migHCL declares MIG packages of an A100-SXM4-40GB (1g.5gb, 3g.20gb and
// 7g.40gb) in namespace ns, a quota granting them, and the workloads.
func migHCL(ns, workloads string) string {
	pkg := func(res, profile string) string {
		return `
resource "gpuslice_package" "` + res + `" {
  name        = "` + ns + `-` + strings.SplitN(profile, ".", 2)[0] + `"
  gpu_model   = "NVIDIA A100-SXM4-40GB"
  mig_profile = "` + profile + `"
}
`
	}
	return pkg("small", "1g.5gb") + pkg("large", "3g.20gb") + pkg("whole", "7g.40gb") + `
resource "gpuslice_quota" "q" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.small.name) = 7, (gpuslice_package.large.name) = 3, (gpuslice_package.whole.name) = 1 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}
` + workloads
}

func migWorkloadHCL(name, pkg, replicas, extra string) string {
	return `
resource "gpuslice_workload" "` + name + `" {
  namespace = gpuslice_quota.q.namespace
  name      = "` + name + `"
  package   = gpuslice_package.` + pkg + `.name
  replicas  = ` + replicas + `
  wait_for  = "none"
  ` + extra + `
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "100m"
    memory_request = "256Mi"
  }
}
`
}

// TestMIGOnTheScheduler: on a node whose A100s are in MIG mode (seven
// 1g.5gb instances on GPU 0, two 3g.20gb on GPU 1, published with the
// contract's names), the real scheduler gives a 1g.5gb workload's pods
// 1g.5gb instances and a 3g.20gb workload's 3g.20gb ones; a third 3g.20gb
// pod waits with a reason naming the profile, and capacity counts the
// instances allocated and free. A workload on a profile no
// node has (7g.40gb), or with a model that does not fit 1g.5gb, fails at
// plan.
func TestMIGOnTheScheduler(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	instances := append(simnode.A100MIG("mig-node", 0, 7, "1g.5gb", 1, 4864), simnode.A100MIG("mig-node", 1, 2, "3g.20gb", 4, 19968)...)
	n, err := simnode.StartMIG(ctx, c, "mig-node", instances)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if _, err := simnode.Published(ctx, c.Client(), []*simnode.Node{n}, time.Now(), 30*time.Second); err != nil {
		t.Fatal(err)
	}

	s := loadStack(t, "mig", migHCL("mig", migWorkloadHCL("small", "small", "2", "")+migWorkloadHCL("large", "large", "3", "")))
	p := mustApply(t, e, s)
	if got := errorsOf(p.Diagnostics); len(got) > 0 {
		t.Fatalf("plan errors: %q", got)
	}
	if got := warningsOf(p.Diagnostics); !contains(got, "gpuslice_package.whole.mig_profile: MIG slices not offered: the nodes with NVIDIA A100-SXM4-40GB GPUs in MIG mode publish MIG instances of 7 × 1g.5gb and 2 × 3g.20gb only, none of 7g.40gb") {
		t.Errorf("plan warnings lack the unpublished profile:\n%s", strings.Join(got, "\n"))
	}
	small := pollStatus(t, e, s, "gpuslice_workload.small", func(st status.Status) bool { return st.Scheduled == 2 })
	if small.Node != "mig-node" || !strings.HasPrefix(small.Device, "gpu-0-mig-1g-5gb-") {
		t.Errorf("1g.5gb pods placed on %s/%s, want a 1g.5gb instance of mig-node's GPU 0", small.Node, small.Device)
	}
	large := pollStatus(t, e, s, "gpuslice_workload.large", func(st status.Status) bool {
		return st.Scheduled == 2 && st.Reason == status.WaitingForSlice
	})
	if large.Phase != status.Pending || !strings.Contains(large.Message, "1 of 3 replicas wait for a slice: waiting for a free MIG instance: no node has a free 3g.20gb instance for a mig-3g slice") {
		t.Errorf("3g.20gb workload: %s %q", large.Phase, large.Message)
	}
	capacity, err := e.Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]int64{"mig-1g": {7, 2, 5}, "mig-3g": {2, 2, 0}, "mig-7g": {0, 0, 0}}
	for _, pc := range capacity {
		w, ok := want[pc.Name]
		if !ok {
			continue
		}
		delete(want, pc.Name)
		if pc.Sharing != "mig" || pc.Isolation != "hardware" || [3]int64{pc.Published, pc.Allocated, pc.Free} != w {
			t.Errorf("capacity of %s: %+v, want published, allocated, free %v", pc.Name, pc, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("capacity lacks %v", want)
	}

	for _, c := range []struct {
		name, workloads, want string
	}{
		{"profile no node has", migWorkloadHCL("whole", "whole", "1", ""),
			"gpuslice_workload.whole.package: MIG slices not offered: gpuslice_workload.whole's pods would wait in Pending for good: the nodes with NVIDIA A100-SXM4-40GB GPUs in MIG mode publish MIG instances of 7 × 1g.5gb and 2 × 3g.20gb only, none of 7g.40gb"},
		{"model larger than the instance", migWorkloadHCL("llm", "small", "1", `model {
    name           = "llama3.1:8b"
    context_length = 8192
  }`),
			"gpuslice_workload.llm.model.context_length: Model does not fit the slice: llama3.1:8b needs about 6.1 GiB of GPU memory — weights 4.6 GiB + KV cache 1.0 GiB (8192 tokens, f16) + ollama's overhead 0.5 GiB — and a mig-bad-1g slice has 4.8 GiB"},
	} {
		p, err := e.Plan(ctx, loadStack(t, "mig-bad", migHCL("mig-bad", c.workloads)), plan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := errorsOf(p.Diagnostics); !contains(got, c.want) {
			t.Errorf("%s: plan errors = %q\nwant %q", c.name, got, c.want)
		}
	}
}
