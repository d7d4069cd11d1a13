package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// benchStack is n workloads spread over 10 namespaces, each with a quota,
// sharing two packages. Workloads have zero replicas so the controllers do
// not flood the API server with pods: the benchmark measures gpuslice.
func benchStack(name string, n int, contextLength string) *spec.Stack {
	s := &spec.Stack{Name: name}
	for _, f := range []int{25, 50} {
		s.Packages = append(s.Packages, &spec.Package{Meta: spec.Meta{Address: fmt.Sprintf("gpuslice_package.p%d", f)},
			Name: fmt.Sprintf("%s-%d", name, f), GPUModel: "Tesla V100-PCIE-32GB", Fraction: f})
	}
	for ns := range 10 {
		s.Quotas = append(s.Quotas, &spec.Quota{Meta: spec.Meta{Address: fmt.Sprintf("gpuslice_quota.q%d", ns)},
			Namespace: fmt.Sprintf("%s-ns%d", name, ns), Slices: map[string]int64{s.Packages[0].Name: int64(n)}, CPURequests: "1000"})
	}
	for i := range n {
		s.Workloads = append(s.Workloads, &spec.Workload{
			Meta:      spec.Meta{Address: fmt.Sprintf("gpuslice_workload.w%d", i)},
			Namespace: fmt.Sprintf("%s-ns%d", name, i%10), Name: fmt.Sprintf("w%d", i),
			Package: s.Packages[i%2].Name, Kind: spec.KindDeployment, Replicas: 0,
			Container: spec.Container{Image: "ollama/ollama:0.24.0", CPURequest: "1", MemoryRequest: "2Gi", MemoryLimit: "4Gi",
				Env: map[string]string{"OLLAMA_CONTEXT_LENGTH": contextLength}, Ports: []spec.Port{{ContainerPort: 11434, Name: "http", Protocol: "TCP"}}},
			Expose:  &spec.Expose{Port: 11434, Type: "ClusterIP"},
			WaitFor: spec.WaitNone, Timeout: "1m",
		})
	}
	s.Resolve(tables.BuiltinGPUModels())
	return s
}

// BenchmarkPlanApply reports, for 50, 200 and 1000 workloads over 10
// namespaces on the local control plane, milliseconds and API requests per
// object for: the first apply (everything created), a plan with nothing to
// do, and an apply that changes every workload. Targets: plan ≤0.1
// requests/object, apply ≤1.1 requests per changed object.
func BenchmarkPlanApply(b *testing.B) {
	c := clustertest.Shared(b)
	ctx := context.Background()
	for _, n := range []int{50, 200, 1000} {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				e, err := engine.New(c.RESTConfig(), "")
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				name := fmt.Sprintf("bench%d-%d", n, i)
				measure := func(metric string, s *spec.Stack, wantChanges bool) {
					before := e.Clients.Requests.Count()
					start := time.Now()
					p, err := e.Plan(ctx, s, plan.Options{})
					if err != nil {
						b.Fatal(err)
					}
					planReqs, planTime := e.Clients.Requests.Count()-before, time.Since(start)
					objects := float64(len(p.Desired))
					if !wantChanges {
						if p.HasChanges() {
							b.Fatalf("plan of an applied stack has changes")
						}
						b.ReportMetric(float64(planReqs)/objects, "plan-req/obj")
						b.ReportMetric(float64(planTime.Milliseconds())/objects, "plan-ms/obj")
						return
					}
					changed := float64(p.Count(plan.Create) + p.Count(plan.Update))
					before, start = e.Clients.Requests.Count(), time.Now()
					if err := e.Apply(ctx, p, apply.Options{Concurrency: 16}); err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(e.Clients.Requests.Count()-before)/changed, metric+"-req/changed")
					b.ReportMetric(float64(time.Since(start).Milliseconds())/changed, metric+"-ms/changed")
				}
				measure("create", benchStack(name, n, "4096"), true)
				measure("", benchStack(name, n, "4096"), false)
				measure("update", benchStack(name, n, "16384"), true)

				b.StopTimer()
				dp, err := e.PlanDestroy(ctx, name)
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Destroy(ctx, dp, apply.Options{Concurrency: 16}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
