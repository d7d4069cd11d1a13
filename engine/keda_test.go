package engine_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

const kedaAutoscaling = `autoscaling {
    min_replicas = 1
    max_replicas = 2
    keda {
      polling_interval = 15
      prometheus {
        server_address = "http://prometheus.monitoring.svc:9090"
        query          = "histogram_quantile(0.95, sum(rate(queue_latency_seconds_bucket[2m])) by (le))"
        threshold      = "0.5"
      }
    }
  }`

var scaledObjects = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}

// TestKEDAScaledObject: a keda block is refused at plan while KEDA's CRD
// is missing; with KEDA's ScaledObject CRD installed it renders a
// ScaledObject instead of an HPA, plans no change after apply, and shows
// a hand edit of it as drift.
func TestKEDAScaledObject(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	const ns = "autoscale-keda"
	s := loadStack(t, ns, autoscaleHCL(ns, "", kedaAutoscaling))

	p, err := e.Plan(ctx, s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, d := range p.Diagnostics {
		if d.Severity == diag.Error {
			errs = append(errs, d.Address+"."+d.Attribute+": "+d.Summary+": "+d.Detail)
		}
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "gpuslice_workload.infer.autoscaling.keda: KEDA not installed") ||
		!strings.Contains(errs[0], "install KEDA") || !strings.Contains(errs[0], "remove the keda block") {
		t.Fatalf("plan errors without KEDA = %q", errs)
	}

	clustertest.ServeCRD(t, c.RESTConfig(), clustertest.ScaledObject)
	mustApply(t, e, s)
	so, err := dynamic.NewForConfigOrDie(c.RESTConfig()).Resource(scaledObjects).Namespace(ns).Get(ctx, "infer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	target, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "name")
	triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
	if target != "infer" || len(triggers) != 1 || triggers[0].(map[string]any)["type"] != "prometheus" {
		t.Errorf("ScaledObject spec = %v", so.Object["spec"])
	}
	if _, err := c.Client().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "infer", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an HPA of gpuslice's beside the ScaledObject: %v", err)
	}
	d, err := c.Client().AppsV1().Deployments(ns).Get(ctx, "infer", metav1.GetOptions{})
	if err != nil || d.Annotations[objects.AnnotationAutoscaledBy] != "ScaledObject/infer" {
		t.Fatalf("Deployment annotations %v, %v", d.Annotations, err)
	}

	// A hand edit of the ScaledObject is drift, shown field by field with
	// KEDA's own schema, and apply restores it.
	soClient := dynamic.NewForConfigOrDie(c.RESTConfig()).Resource(scaledObjects).Namespace(ns)
	if _, err := soClient.Patch(ctx, "infer", types.MergePatchType, []byte(`{"spec":{"maxReplicaCount":5}}`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	p = mustPlan(t, e, s)
	if ch := changesOf(p); len(ch) != 1 || ch[0].Ref.Kind != "ScaledObject" || ch[0].Action != plan.Update ||
		len(ch[0].Fields) != 1 || ch[0].Fields[0].Path != ".spec.maxReplicaCount" {
		t.Fatalf("plan after editing the ScaledObject:\n%s", planText(p))
	}
	mustApply(t, e, s)
	requireNoChanges(t, e, s)

	// KEDA's HPA scales the Deployment; gpuslice leaves the count alone.
	scaleTo(t, c.Client(), ns, "infer", 2)
	requireNoChanges(t, e, s)
	mustApply(t, e, s)
	if got := replicasOf(t, c.Client(), ns, "infer"); got != 2 {
		t.Fatalf("a second apply set replicas to %d, want KEDA's 2", got)
	}
	r, err := e.ReadResource(ctx, "gpuslice_workload", ns+"/infer", s.Workloads[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := r.(*spec.Workload).Autoscaling; got == nil || got.KEDA == nil || got.KEDA.Prometheus == nil || *got.KEDA.PollingInterval != 15 ||
		got.KEDA.Prometheus.Threshold != "0.5" || got.MaxReplicas != 2 {
		t.Errorf("read back autoscaling %+v", got)
	}
}
