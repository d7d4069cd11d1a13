package engine_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// readsStack is a package, and in each namespace a quota and workloads
// (a Deployment, its claim template and Service each) of replicas pods.
func readsStack(prefix string, namespaces []string, workloads int, replicas func(ns string, i int) int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `
resource "gpuslice_package" "p" {
  name      = "%s-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}
`, prefix)
	for _, ns := range namespaces {
		fmt.Fprintf(&b, `
resource "gpuslice_quota" "%s" {
  namespace    = "%s"
  slices       = { (gpuslice_package.p.name) = 10 }
  cpu_requests = "100"
}
`, ns, ns)
		for i := range workloads {
			fmt.Fprintf(&b, `
resource "gpuslice_workload" "%s-w%d" {
  namespace = gpuslice_quota.%s.namespace
  name      = "w%d"
  package   = gpuslice_package.p.name
  replicas  = %d
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    port {
      container_port = 11434
    }
  }
  expose {
    port = 11434
  }
}
`, ns, i, ns, i, replicas(ns, i))
		}
	}
	return b.String()
}

// A run reads in each namespace the kinds its resources have, nothing
// more: what a Terraform plan's reads (every resource read back, then the
// stack planned, checked and diagnosed) start in a namespace of a quota
// and workloads scaled to zero is the Namespace by name, the quotas, and
// the Deployments, claim templates and Services the workloads render —
// not the StatefulSets, Jobs, volumes, autoscalers, RoleBindings, limit
// ranges and pods none of them has or needs. A workload that wants a pod
// adds its namespace's pods (and warnings, while it has none), and only
// that namespace's.
func TestReadsOnlyTheKindsANamespaceHas(t *testing.T) {
	ctx := context.Background()
	first, c := newEngine(t)
	namespaces := []string{"reads-a", "reads-b", "reads-c"}
	zero := func(string, int) int { return 0 }
	s := loadStack(t, "reads", readsStack("reads", namespaces, 3, zero))
	mustApply(t, first, s) // and plan at once: what is read does not wait for the controllers

	// A new engine is a new run, as each Terraform command is.
	runReads := func(s *spec.Stack) map[string][]string {
		e, err := engine.New(c.RESTConfig(), "")
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		for _, q := range s.Quotas {
			if _, err := e.ReadResource(ctx, schema.Quota.Type, q.ID(), q); err != nil {
				t.Fatal(err)
			}
		}
		for _, w := range s.Workloads {
			if _, err := e.ReadResource(ctx, schema.Workload.Type, w.ID(), w); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Plan(ctx, s, plan.Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Status(ctx, s); err != nil {
			t.Fatal(err)
		}
		return readsByNamespace(e.Reads(), namespaces)
	}
	want := []string{"deployments.apps labelled app.kubernetes.io/managed-by=gpuslice", "namespaces with metadata.name=%s", "resourceclaimtemplates.resource.k8s.io labelled app.kubernetes.io/managed-by=gpuslice",
		"resourcequotas", "services labelled app.kubernetes.io/managed-by=gpuslice"}
	got := runReads(s)
	for _, ns := range namespaces {
		if !sameReads(got[ns], want, ns) {
			t.Errorf("a plan of a quota and workloads scaled to zero read in %s:\n  %s\nwant:\n  %s", ns, strings.Join(got[ns], "\n  "), strings.ReplaceAll(strings.Join(want, "\n  "), "%s", ns))
		}
	}

	// One pod wanted in reads-b (planned, not applied): its pods are read
	// there, and only there, with the warnings that say why it has none.
	onePod := func(ns string, i int) int {
		if ns == "reads-b" && i == 0 {
			return 1
		}
		return 0
	}
	got = runReads(loadStack(t, "reads", readsStack("reads", namespaces, 3, onePod)))
	withPods := append([]string{"pods labelled gpuslice.dev/workload", "events with type=Warning"}, want...)
	for _, ns := range namespaces {
		w := want
		if ns == "reads-b" {
			w = withPods
		}
		if !sameReads(got[ns], w, ns) {
			t.Errorf("a plan with one pod wanted in reads-b read in %s:\n  %s\nwant:\n  %s", ns, strings.Join(got[ns], "\n  "), strings.ReplaceAll(strings.Join(w, "\n  "), "%s", ns))
		}
	}
}

// readsByNamespace sorts the reads of namespaces by namespace: those in
// it, and the Namespace itself read by name.
func readsByNamespace(reads []engine.Read, namespaces []string) map[string][]string {
	out := map[string][]string{}
	for _, r := range reads {
		for _, ns := range namespaces {
			if r.Namespace == ns || (r.Kind == "Namespace" && r.Fields == "metadata.name="+ns) {
				out[ns] = append(out[ns], r.Resource)
			}
		}
	}
	for _, rs := range out {
		sort.Strings(rs)
	}
	return out
}

func sameReads(got, want []string, ns string) bool {
	w := make([]string, len(want))
	for i, s := range want {
		w[i] = strings.ReplaceAll(s, "%s", ns)
	}
	sort.Strings(w)
	return strings.Join(got, "\n") == strings.Join(w, "\n")
}
