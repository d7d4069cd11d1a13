package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/internal/cluster"
)

// storyHCL is the field story: a platform team grants team-a a 25 % V100
// slice and pooled CPU, and the workload either repeats each lesson
// (mistaken) or encodes what worked.
func storyHCL(workload string) string {
	return `
resource "gpuslice_package" "small" {
  name      = "story-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}
resource "gpuslice_quota" "team" {
  namespace       = "story"
  slices          = { (gpuslice_package.small.name) = 2 }
  cpu_requests    = "2"
  memory_requests = "12Gi"
  cpu_limits      = "8"
  memory_limits   = "24Gi"
}
` + workload
}

const mistakenWorkloads = `
resource "gpuslice_workload" "ollama" {
  namespace      = gpuslice_quota.team.namespace
  name           = "ollama"
  package        = gpuslice_package.small.name
  preload_models = ["llama3.2:3b"]
  expose { port = 11434 }
  container {
    image          = "ollama/ollama:latest"
    memory_request = "256Mi"
    memory_limit   = "512Mi"
    cpu_request    = "1"
    cpu_limit      = "2"
  }
}
resource "gpuslice_workload" "agent" {
  namespace = gpuslice_quota.team.namespace
  name      = "agent"
  package   = gpuslice_package.small.name
  container {
    image          = "ollama/ollama:0.30.0"
    env            = { OLLAMA_CONTEXT_LENGTH = "131072" }
    memory_request = "2Gi"
    memory_limit   = "4Gi"
    cpu_request    = "1"
    cpu_limit      = "1"
  }
  model_volume {
    size       = "20Gi"
    mount_path = "/root/.ollama"
  }
  model { name = "llama3.2:3b" }
}
`

const correctedWorkload = `
resource "gpuslice_workload" "ollama" {
  namespace      = gpuslice_quota.team.namespace
  name           = "ollama"
  package        = gpuslice_package.small.name
  preload_models = ["llama3.2:3b"]
  expose { port = 11434 }
  container {
    image          = "ollama/ollama:0.24.0"
    env            = { OLLAMA_CONTEXT_LENGTH = "16384" }
    memory_request = "2Gi"
    memory_limit   = "4Gi"
    cpu_request    = "250m"
    cpu_limit      = "1"
  }
  model_volume {
    size       = "20Gi"
    mount_path = "/root/.ollama"
  }
  model {
    name           = "llama3.2:3b"
    context_length = 16384
  }
}
`

// TestFieldStoryAtPlan: on the local control plane, with a V100 published
// and another team's pod already using most of the namespace's CPU, the
// mistaken configuration gets exactly the field's lessons as errors and
// warnings on their attributes, and the corrected one plans clean.
func TestFieldStoryAtPlan(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	gpu := &draproof.Proof{Client: c.Client(), Node: "gpu-node-1", Model: "Tesla V100-PCIE-32GB"}
	if _, err := gpu.PublishGPU(ctx, 25); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}

	// The platform part first, then a pod outside gpuslice takes 1500m of
	// the namespace's 2 CPUs.
	mustApply(t, e, loadStack(t, "story", storyHCL("")))
	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "other-team-job", Namespace: "story"},
		Spec: corev1.PodSpec{NodeName: "gpu-node-2", Containers: []corev1.Container{{Name: "job", Image: "busybox:1.37",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			}}}},
	}
	if _, err := c.Client().CoreV1().Pods("story").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitQuotaUsed(t, c.Client().CoreV1().ResourceQuotas("story"), "1500m", func() string {
		p, err := c.Client().CoreV1().Pods("story").Get(ctx, "other-team-job", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("pod phase %s, deleted %v, node %s", p.Status.Phase, p.DeletionTimestamp, p.Spec.NodeName)
	})

	facts, err := engine.GatherFacts(ctx, e, loadStack(t, "story", storyHCL(mistakenWorkloads)))
	if err != nil {
		t.Fatal(err)
	}
	if cc := facts.ComputeCapability["Tesla V100-PCIE-32GB"]; cc != "7.0.0" {
		t.Errorf("compute capability from the published devices = %q, want 7.0.0", cc)
	}

	p, err := e.Plan(ctx, loadStack(t, "story", storyHCL(mistakenWorkloads)), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range p.Diagnostics {
		if d.Attribute == "package" && strings.Contains(d.Summary, "free slice") {
			continue // other tests share the cluster's V100s: TestFreeSlicesAtPlan checks this
		}
		got = append(got, fmt.Sprintf("%s %s.%s: %s", d.Severity, d.Address, d.Attribute, d.Summary))
	}
	want := []string{
		"Warning gpuslice_workload.ollama.container.image: Unpinned image",
		"Warning gpuslice_workload.ollama.container.memory_limit: Container RAM limit too low for ollama",
		"Warning gpuslice_workload.ollama.container.env: Context left at the runtime default",
		"Warning gpuslice_workload.ollama.model_volume: Models are not kept",
		"Error gpuslice_workload.agent.container.image: Image does not run on this GPU",
		`Error gpuslice_workload.agent.container.env["OLLAMA_CONTEXT_LENGTH"]: Model does not fit the slice`,
		"Error gpuslice_workload.ollama.container.cpu_request: Not enough quota",
		"Error gpuslice_workload.agent.container.cpu_request: Not enough quota",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("mistaken config (-want +got):\n%s", diff)
	}
	for _, d := range p.Diagnostics {
		if d.Summary == "Not enough quota" && d.Address == "gpuslice_workload.ollama" &&
			!strings.Contains(d.Detail, "ResourceQuota gpuslice in story has 500m of requests.cpu left (hard 2); this workload needs 1050m") {
			t.Errorf("quota detail = %q", d.Detail)
		}
	}

	good := mustPlan(t, e, loadStack(t, "story", storyHCL(correctedWorkload)))
	for _, d := range good.Diagnostics {
		if !(d.Attribute == "package" && strings.Contains(d.Summary, "free slice")) {
			t.Errorf("corrected config: %v", d)
		}
	}
}

// TestFreeSlicesAtPlan: with two half T4s published on a node of their own
// (no other test uses that model), the plan says how many of the wanted
// slices are free now, counting the stack's workloads in order.
func TestFreeSlicesAtPlan(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: "t4-node"}); err != nil {
		t.Fatal(err)
	}
	gpu := &draproof.Proof{Client: c.Client(), Node: "t4-node", Model: "Tesla T4"}
	if _, err := gpu.PublishGPU(ctx, 50); err != nil {
		t.Fatal(err)
	}
	s := loadStack(t, "free", `
resource "gpuslice_package" "t4" {
  name      = "t4-half"
  gpu_model = "Tesla T4"
  fraction  = 50
}
resource "gpuslice_quota" "q" {
  namespace = "free"
  slices    = { (gpuslice_package.t4.name) = 3 }
}
resource "gpuslice_workload" "one" {
  namespace = gpuslice_quota.q.namespace
  name      = "one"
  package   = gpuslice_package.t4.name
  container { image = "nvidia/cuda:12.6.3-runtime-ubuntu22.04" }
}
resource "gpuslice_workload" "two" {
  namespace = gpuslice_quota.q.namespace
  name      = "two"
  package   = gpuslice_package.t4.name
  kind      = "statefulset"
  replicas  = 2
  container { image = "nvidia/cuda:12.6.3-runtime-ubuntu22.04" }
}
`)
	p, err := e.Plan(ctx, s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range p.Diagnostics {
		got = append(got, fmt.Sprintf("%s %s.%s: %s: %s", d.Severity, d.Address, d.Attribute, d.Summary, d.Detail))
	}
	want := []string{"Warning gpuslice_workload.two.package: Not enough free slices now: 1 free t4-half slices in the cluster now and this workload wants 2; the rest will wait in Pending until slices free"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func waitQuotaUsed(t *testing.T, quotas interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.ResourceQuota, error)
}, cpu string, podState func() string) {
	t.Helper()
	want := resource.MustParse(cpu)
	deadline := time.Now().Add(60 * time.Second)
	for {
		q, err := quotas.Get(context.Background(), "gpuslice", metav1.GetOptions{})
		if err == nil {
			if used, ok := q.Status.Used[corev1.ResourceRequestsCPU]; ok && used.Cmp(want) == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("quota never showed %s of requests.cpu used (%s): %v %v", cpu, podState(), q.Status, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
