package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

var (
	trainJobs        = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}
	trainingRuntimes = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainingruntimes"}
)

// trainJobHCL is a three-worker training job on whole GPUs; operator is
// the training_operator line, empty for the indexed Job.
func trainJobHCL(operator, ncclDebug string) string {
	return fmt.Sprintf(`
resource "gpuslice_package" "whole" {
  name      = "tj-16gi"
  gpu_model = "Tesla V100-PCIE-16GB"
  fraction  = 100
}
resource "gpuslice_quota" "q" {
  namespace       = "trainjob"
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
    env            = { NCCL_DEBUG = %q }
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`, operator, ncclDebug)
}

// TestTrainJob: training_operator = "trainjob" is refused at plan while
// the cluster does not serve Kubeflow Trainer's kinds; with Trainer's CRDs
// it renders a TrainingRuntime of the workload's own (three nodes of two
// processes, the claim template in the pod) and a TrainJob running it,
// instead of the indexed Job and its Service. Plan shows no change after
// apply (though the CRD defaults the TrainJob's managedBy); a changed
// configuration updates the runtime and replaces the TrainJob, whose
// JobSet Trainer made from the old one. It reads back, and says honestly
// that no pod exists while Trainer does not run. Leaving the attribute
// out again prunes both for the indexed Job.
func TestTrainJob(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	const ns = "trainjob"
	s := loadStack(t, ns, trainJobHCL(`training_operator = "trainjob"`, "INFO"))

	p, err := e.Plan(ctx, s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := errorsOf(p.Diagnostics); len(got) != 1 || !strings.HasPrefix(got[0], "gpuslice_workload.ddp.training_operator: Kubeflow Trainer not installed") ||
		!strings.Contains(got[0], "install Kubeflow Trainer v2") || !strings.Contains(got[0], "leave training_operator unset") {
		t.Fatalf("plan errors without Trainer's CRDs = %q", got)
	}
	if r, err := e.ReadResource(ctx, "gpuslice_workload", ns+"/ddp", s.Workloads[0]); err != nil || r != nil {
		t.Fatalf("read back without the CRDs: %v, %v", r, err)
	}

	clustertest.ServeCRD(t, c.RESTConfig(), clustertest.TrainJob, clustertest.TrainingRuntime)
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
	job, err := dyn.Resource(trainJobs).Namespace(ns).Get(ctx, "ddp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref, _, _ := unstructured.NestedStringMap(job.Object, "spec", "runtimeRef"); ref["name"] != "ddp" || ref["kind"] != "TrainingRuntime" {
		t.Errorf("runtimeRef = %v, want the TrainingRuntime ddp", ref)
	}
	if by, _, _ := unstructured.NestedString(job.Object, "spec", "managedBy"); by != "trainer.kubeflow.org/trainjob-controller" {
		t.Fatalf("managedBy = %q: want the CRD's default, which the no-change plan below must not show", by)
	}
	rt, err := dyn.Resource(trainingRuntimes).Namespace(ns).Get(ctx, "ddp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, _, _ := unstructured.NestedInt64(rt.Object, "spec", "mlPolicy", "numNodes")
	procs, _, _ := unstructured.NestedInt64(rt.Object, "spec", "mlPolicy", "torch", "numProcPerNode")
	jobs, _, _ := unstructured.NestedSlice(rt.Object, "spec", "template", "spec", "replicatedJobs")
	if nodes != 3 || procs != 2 || len(jobs) != 1 {
		t.Fatalf("runtime: %d nodes of %d processes, %d replicated jobs; want 3 of 2, 1", nodes, procs, len(jobs))
	}
	pod, _, _ := unstructured.NestedMap(jobs[0].(map[string]any), "template", "spec", "template", "spec")
	claims, _ := pod["resourceClaims"].([]any)
	if len(claims) != 1 || claims[0].(map[string]any)["resourceClaimTemplateName"] != "ddp-tj-16gi-x2" {
		t.Errorf("runtime pod claims = %v, want the claim template ddp-tj-16gi-x2 (kept by Trainer's schema)", claims)
	}
	containers, _ := pod["containers"].([]any)
	if len(containers) != 1 || containers[0].(map[string]any)["name"] != "node" {
		t.Errorf("runtime containers = %v, want one named node (where Trainer puts the rendezvous)", containers)
	}
	if _, err := c.Client().BatchV1().Jobs(ns).Get(ctx, "ddp", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an indexed Job beside the TrainJob: %v", err)
	}
	if _, err := c.Client().CoreV1().Services(ns).Get(ctx, "ddp-workers", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a headless Service beside the TrainJob (Trainer makes its own): %v", err)
	}
	requireNoChanges(t, e, s)

	changed := loadStack(t, ns, trainJobHCL(`training_operator = "trainjob"`, "WARN"))
	p = mustPlan(t, e, changed)
	var got []string
	for _, ch := range changesOf(p) {
		got = append(got, fmt.Sprintf("%s %s", ch.Action, ch.Ref.Kind))
	}
	slices.Sort(got)
	if strings.Join(got, ", ") != "replace TrainJob, update TrainingRuntime" {
		t.Fatalf("plan of a changed environment = %q, want the runtime updated and the TrainJob replaced:\n%s", got, planText(p))
	}
	if err := e.Apply(ctx, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	requireNoChanges(t, e, changed)

	r, err := e.ReadResource(ctx, "gpuslice_workload", ns+"/ddp", changed.Workloads[0])
	if err != nil {
		t.Fatal(err)
	}
	if w := r.(*spec.Workload); w == nil || w.TrainingOperator != "trainjob" || w.Workers != 3 || w.GPUsPerPod != 2 || w.Replicas != 1 ||
		w.Container.Env["NCCL_DEBUG"] != "WARN" {
		t.Errorf("read back %+v", r)
	}
	st := pollStatus(t, e, changed, "gpuslice_workload.ddp", func(st status.Status) bool { return st.Phase != "" })
	if st.Phase != status.Pending || !strings.Contains(st.Message, "TrainJob trainjob/ddp has no pods yet") ||
		!strings.Contains(st.Message, "check that Trainer and JobSet run") {
		t.Errorf("status without Trainer: %s (%s) %q", st.Phase, st.Reason, st.Message)
	}

	back := loadStack(t, ns, trainJobHCL("", "WARN"))
	mustApply(t, e, back)
	for _, res := range []schema.GroupVersionResource{trainJobs, trainingRuntimes} {
		if _, err := dyn.Resource(res).Namespace(ns).Get(ctx, "ddp", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the %s was not pruned for the indexed Job: %v", res.Resource, err)
		}
	}
	if _, err := c.Client().BatchV1().Jobs(ns).Get(ctx, "ddp", metav1.GetOptions{}); err != nil {
		t.Errorf("the indexed Job: %v", err)
	}
	requireNoChanges(t, e, back)
}
