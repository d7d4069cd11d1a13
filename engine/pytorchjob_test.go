package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

var pyTorchJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

// pyTorchHCL is a three-worker training job on whole GPUs; operator is
// the training_operator line, empty for the indexed Job.
func pyTorchHCL(operator string) string {
	return fmt.Sprintf(`
resource "gpuslice_package" "whole" {
  name      = "ptj-16gi"
  gpu_model = "Tesla V100-PCIE-16GB"
  fraction  = 100
}
resource "gpuslice_quota" "q" {
  namespace       = "ptj"
  slices          = { (gpuslice_package.whole.name) = 6 }
  cpu_requests    = "4"
  memory_requests = "4Gi"
}
resource "gpuslice_workload" "ddp" {
  namespace    = gpuslice_quota.q.namespace
  name         = "ddp"
  package      = gpuslice_package.whole.name
  kind         = "job"
  workers      = 3
  gpus_per_pod = 2
  wait_for     = "none"
  %s
  container {
    image          = "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"
    command        = ["torchrun", "/workspace/train.py"]
    env            = { NCCL_DEBUG = "INFO" }
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`, operator)
}

// TestPyTorchJob: training_operator = "pytorchjob" is refused at plan
// while the cluster does not serve PyTorchJob; with the operator's CRD it
// renders a PyTorchJob (a Master and two Workers on the claim template,
// without the rendezvous environment the operator sets) instead of the
// indexed Job and its Service, plans no change after apply (though the
// CRD defaults a field), shows a hand edit as drift, reads back,
// and says honestly that no pod exists while no operator runs. Leaving
// the attribute out again prunes the PyTorchJob for the indexed Job.
func TestPyTorchJob(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	const ns = "ptj"
	s := loadStack(t, ns, pyTorchHCL(`training_operator = "pytorchjob"`))

	p, err := e.Plan(ctx, s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := errorsOf(p.Diagnostics); len(got) != 1 || !strings.HasPrefix(got[0], "gpuslice_workload.ddp.training_operator: Kubeflow Training Operator not installed") ||
		!strings.Contains(got[0], "install the Kubeflow Training Operator") || !strings.Contains(got[0], "leave training_operator unset") {
		t.Fatalf("plan errors without the PyTorchJob CRD = %q", got)
	}

	// Refresh of a workload not applied reads nothing, though the cluster
	// has no PyTorchJob kind to look in.
	if r, err := e.ReadResource(ctx, "gpuslice_workload", ns+"/ddp", s.Workloads[0]); err != nil || r != nil {
		t.Fatalf("read back without the CRD: %v, %v", r, err)
	}

	clustertest.ServeCRD(t, c.RESTConfig(), clustertest.PyTorchJob)
	// Destroyed after the test, so the indexed Job it ends with takes no
	// GPU another test on the shared cluster publishes.
	t.Cleanup(func() {
		dp, err := e.PlanDestroy(context.Background(), ns)
		if err == nil {
			err = e.Destroy(context.Background(), dp, apply.Options{})
		}
		if err != nil {
			t.Errorf("destroy %s: %v", ns, err)
		}
	})
	mustApply(t, e, s)
	dyn := dynamic.NewForConfigOrDie(c.RESTConfig())
	job, err := dyn.Resource(pyTorchJobs).Namespace(ns).Get(ctx, "ddp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for typ, want := range map[string]int64{"Master": 1, "Worker": 2} {
		replicas, _, _ := unstructured.NestedInt64(job.Object, "spec", "pytorchReplicaSpecs", typ, "replicas")
		if replicas != want {
			t.Errorf("%s replicas = %d, want %d", typ, replicas, want)
		}
		pod, _, _ := unstructured.NestedMap(job.Object, "spec", "pytorchReplicaSpecs", typ, "template", "spec")
		claims, _ := pod["resourceClaims"].([]any)
		if len(claims) != 1 || claims[0].(map[string]any)["resourceClaimTemplateName"] != "ddp-ptj-16gi-x2" {
			t.Errorf("%s claims = %v, want the claim template ddp-ptj-16gi-x2", typ, claims)
		}
		containers, _ := pod["containers"].([]any)
		if len(containers) != 1 {
			t.Fatalf("%s containers = %v", typ, containers)
		}
		container := containers[0].(map[string]any)
		env, _ := container["env"].([]any)
		if container["name"] != "pytorch" || len(env) != 1 || env[0].(map[string]any)["name"] != "NCCL_DEBUG" {
			t.Errorf("%s container %v env %v: want the operator's container name and only the configured env (the operator sets the rendezvous)", typ, container["name"], env)
		}
	}
	if n, _, _ := unstructured.NestedString(job.Object, "spec", "nprocPerNode"); n != "2" {
		t.Errorf("nprocPerNode = %q, want gpus_per_pod 2", n)
	}
	if _, err := c.Client().BatchV1().Jobs(ns).Get(ctx, "ddp", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an indexed Job beside the PyTorchJob: %v", err)
	}
	if _, err := c.Client().CoreV1().Services(ns).Get(ctx, "ddp-workers", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a headless Service beside the PyTorchJob (the operator makes its own): %v", err)
	}
	// The CRD defaults runPolicy.suspend, which gpuslice does not set: no
	// change. A hand edit of the spec is drift, shown with the CRD's schema.
	job, err = dyn.Resource(pyTorchJobs).Namespace(ns).Get(ctx, "ddp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if suspend, found, _ := unstructured.NestedBool(job.Object, "spec", "runPolicy", "suspend"); !found || suspend {
		t.Fatalf("runPolicy.suspend = %v (found %v): want the CRD's default false", suspend, found)
	}
	requireNoChanges(t, e, s)
	if _, err := dyn.Resource(pyTorchJobs).Namespace(ns).Patch(ctx, "ddp", types.MergePatchType,
		[]byte(`{"spec":{"pytorchReplicaSpecs":{"Worker":{"replicas":5}}}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	p = mustPlan(t, e, s)
	if ch := changesOf(p); len(ch) != 1 || ch[0].Ref.Kind != "PyTorchJob" || ch[0].Action != plan.Replace || len(ch[0].Fields) != 1 ||
		ch[0].Fields[0].Path != ".spec.pytorchReplicaSpecs.Worker.replicas" || fmt.Sprint(ch[0].Fields[0].Before, "→", ch[0].Fields[0].After) != "5→2" {
		t.Fatalf("plan after editing the PyTorchJob:\n%s", planText(p))
	}
	mustApply(t, e, s)
	requireNoChanges(t, e, s)

	r, err := e.ReadResource(ctx, "gpuslice_workload", ns+"/ddp", s.Workloads[0])
	if err != nil {
		t.Fatal(err)
	}
	if w := r.(*spec.Workload); w == nil || w.TrainingOperator != "pytorchjob" || w.Workers != 3 || w.GPUsPerPod != 2 || w.Replicas != 1 ||
		len(w.Container.Ports) != 0 || len(w.Container.Env) != 1 {
		t.Errorf("read back %+v", r)
	}
	st := pollStatus(t, e, s, "gpuslice_workload.ddp", func(st status.Status) bool { return st.Phase != "" })
	if st.Phase != status.Pending || !strings.Contains(st.Message, "PyTorchJob ptj/ddp has no pods yet") ||
		!strings.Contains(st.Message, "check that the operator runs") {
		t.Errorf("status without an operator: %s (%s) %q", st.Phase, st.Reason, st.Message)
	}

	back := loadStack(t, ns, pyTorchHCL(""))
	mustApply(t, e, back)
	if _, err := dyn.Resource(pyTorchJobs).Namespace(ns).Get(ctx, "ddp", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the PyTorchJob was not pruned for the indexed Job: %v", err)
	}
	if _, err := c.Client().BatchV1().Jobs(ns).Get(ctx, "ddp", metav1.GetOptions{}); err != nil {
		t.Errorf("the indexed Job: %v", err)
	}
	if _, err := c.Client().CoreV1().Services(ns).Get(ctx, "ddp-workers", metav1.GetOptions{}); err != nil {
		t.Errorf("the indexed Job's headless Service: %v", err)
	}
	requireNoChanges(t, e, back)
}
