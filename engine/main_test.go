package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

func TestMain(m *testing.M) {
	os.Exit(clustertest.Main(m, cluster.Options{}, func(c *cluster.Cluster) error {
		for _, n := range []string{"gpu-node-1", "gpu-node-2"} {
			if _, err := c.AddNode(context.Background(), cluster.NodeSpec{Name: n}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// stackHCL is a stack of one package, quota and workload in namespace ns;
// extra is appended.
func stackHCL(ns, extra string) string {
	return `
resource "gpuslice_package" "small" {
  name      = "` + ns + `-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_quota" "q" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.small.name) = 2 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}

resource "gpuslice_workload" "ollama" {
  namespace = gpuslice_quota.q.namespace
  name      = "ollama"
  package   = gpuslice_package.small.name
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "4Gi"
    env            = { OLLAMA_CONTEXT_LENGTH = "16384" }
    port {
      container_port = 11434
    }
  }
  expose {
    port = 11434
  }
}
` + extra
}

func loadStack(t *testing.T, stack, hcl string) *spec.Stack {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	c, diags := hclstack.Load(dir, hclstack.Options{Stack: stack, VarOptions: hclstack.VarOptions{Env: []string{}}})
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	return c.Stack
}

func newEngine(t *testing.T) (*engine.Engine, *cluster.Cluster) {
	t.Helper()
	c := clustertest.Shared(t)
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, c
}

func mustPlan(t *testing.T, e *engine.Engine, s *spec.Stack) *plan.Plan {
	t.Helper()
	p, err := e.Plan(context.Background(), s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Diagnostics.HasErrors() {
		t.Fatal(p.Diagnostics.Err())
	}
	return p
}

func mustApply(t *testing.T, e *engine.Engine, s *spec.Stack) *plan.Plan {
	t.Helper()
	p := mustPlan(t, e, s)
	if err := e.Apply(context.Background(), p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	return p
}

func planText(p *plan.Plan) string {
	var b strings.Builder
	p.WriteText(&b)
	return b.String()
}

func requireNoChanges(t *testing.T, e *engine.Engine, s *spec.Stack) {
	t.Helper()
	p := mustPlan(t, e, s)
	if p.HasChanges() {
		t.Fatalf("plan after apply is not empty:\n%s", planText(p))
	}
	// What an unchanged object's change holds is what a large plan's
	// memory grows with: the live object stays the view's own.
	for _, c := range p.Changes {
		if c.Live != nil {
			t.Fatalf("the no-op change of %s holds a copy of the live object", c.Ref)
		}
	}
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i > 0 {
		return s[:i]
	}
	return s
}

func boolPtr(b bool) *bool { return &b }

func mustDeviceClass(name string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "example.com"`}}},
	}}
}
