package engine_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster"
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
// is missing; with a minimal ScaledObject CRD installed it renders a
// ScaledObject instead of an HPA, and plans no change after apply.
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

	installCRD(t, c, "keda.sh", "v1alpha1", "scaledobjects", "ScaledObject")
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

// installCRD makes the test cluster serve kind until the test ends (see
// clustertest.ServeCRD).
func installCRD(t *testing.T, c *cluster.Cluster, group, version, plural, kind string) {
	t.Helper()
	clustertest.ServeCRD(t, c.RESTConfig(), group, version, plural, kind)
}
