package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	enginekube "github.com/gpuslice/gpuslice/engine/kube"
	"github.com/gpuslice/gpuslice/provider"
)

// readsConfig is a package, two quotas and n workloads (no replicas, so
// controllers stay quiet): n+3 resources.
func readsConfig(n int) string {
	var b strings.Builder
	b.WriteString(providerBlock())
	b.WriteString(`
resource "gpuslice_package" "p" {
  name      = "acc-reads-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}
`)
	for q := range 2 {
		fmt.Fprintf(&b, `
resource "gpuslice_quota" "q%d" {
  namespace    = "acc-reads-%d"
  slices       = { (gpuslice_package.p.name) = 100 }
  cpu_requests = "100"
}
`, q, q)
	}
	for i := range n {
		fmt.Fprintf(&b, `
resource "gpuslice_workload" "w%d" {
  namespace = gpuslice_quota.q%d.namespace
  name      = "w%d"
  package   = gpuslice_package.p.name
  replicas  = 0
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "4Gi"
    port {
      container_port = 11434
    }
  }
  expose {
    port = 11434
  }
}
`, i, i%2, i)
	}
	return b.String()
}

// requestsOfLastRun is a plan check that keeps what the provider's run
// that made the plan sent: its engine is the last one configured (reading
// the saved plan configures none).
type requestsOfLastRun struct {
	p         func() (enginekube.Counts, int)
	counts    *enginekube.Counts
	informers *int
	fast      func()
}

func (r requestsOfLastRun) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, _ *plancheck.CheckPlanResponse) {
	*r.counts, *r.informers = r.p()
	r.fast()
}

// One `terraform plan` (refresh, then every resource's ModifyPlan) of 23
// and of 43 resources sends the same list requests: every resource reads
// from the run's one view, whose informers list each kind once, all of
// them started at Configure. Every resource of such a plan is read and
// planned by the fast path (checked against the framework's answer).
func TestAccPlanListsDoNotGrowWithResources(t *testing.T) {
	needCluster(t)
	p := provider.New("test")()
	factories := map[string]func() (tfprotov6.ProviderServer, error){"gpuslice": provider.NewCheckedServer(p)}
	last := func() (enginekube.Counts, int) { return provider.LastRun(p) }
	var prefetched int
	const small, large = 20, 40
	var smallReq, largeReq enginekube.Counts
	var smallInf, largeInf int
	step := func(n int, counts *enginekube.Counts, informers *int) []resource.TestStep {
		var before provider.Served
		return []resource.TestStep{
			{Config: readsConfig(n), Check: func(*terraform.State) error {
				before = provider.FastServed(p)
				return nil
			}},
			{
				Config: readsConfig(n), PlanOnly: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(), requestsOfLastRun{p: last, counts: counts, informers: informers, fast: func() {
						prefetched = provider.Prefetched(p)
						after, resources := provider.FastServed(p), int64(n+3)
						if after.Upgrade-before.Upgrade < resources || after.Read-before.Read < resources || after.Plan-before.Plan < resources {
							t.Errorf("the fast path served %d state upgrades, %d reads and %d plans of a no-change plan of %d resources; want each resource's",
								after.Upgrade-before.Upgrade, after.Read-before.Read, after.Plan-before.Plan, resources)
						}
					}},
				}},
			},
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps:                    append(step(small, &smallReq, &smallInf), step(large, &largeReq, &largeInf)...),
	})
	if t.Failed() {
		return
	}
	t.Logf("plan of %d resources: %s, %d informers", small+3, smallReq, smallInf)
	t.Logf("plan of %d resources: %s, %d informers", large+3, largeReq, largeInf)
	// An informer's first list is a watch that streams the objects
	// (client-go's WatchList) or a LIST: count both, and GETs.
	if smallReq.Reads() == 0 || smallInf == 0 {
		t.Fatalf("the plan's run read nothing (%s, %d informers): the check did not see the plan's engine", smallReq, smallInf)
	}
	if largeReq.Reads() != smallReq.Reads() || largeReq.List != smallReq.List || largeInf != smallInf {
		t.Errorf("reads grew with the resources: %d resources %s (%d informers), %d resources %s (%d informers)",
			small+3, smallReq, smallInf, large+3, largeReq, largeInf)
	}
	// Configure started every informer the plan read from: the kinds of
	// the workloads were listed while the package and quotas were planned.
	if largeInf != prefetched {
		t.Errorf("the plan ran %d informers, of which Configure prefetched %d: list what reading or planning a resource reads in engine.Prefetch", largeInf, prefetched)
	}
	if writes := largeReq.Total() - largeReq.Reads(); writes != 0 {
		t.Errorf("a plan wrote %d times", writes)
	}
}
