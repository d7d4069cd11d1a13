package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// TestLiveIsWhatTheAPIServerReturns: the view keeps the kinds client-go
// knows as their Go type, read as protobuf, and converts an object to
// unstructured when plan compares it with what gpuslice renders. Every
// object of an applied stack must then be, field for field, what the API
// server returns as JSON: a conversion that lost or changed a field would
// show as drift, or hide it. Only the field sets of other managers than
// gpuslice's apply are left out: nothing reads them.
func TestLiveIsWhatTheAPIServerReturns(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	s := loadStack(t, "live", stackHCL("live", `
resource "gpuslice_workload" "job" {
  namespace = gpuslice_quota.q.namespace
  name      = "train"
  kind      = "job"
  package   = gpuslice_package.small.name
  wait_for  = "none"
  container {
    image          = "busybox:1.37"
    command        = ["sh", "-c", "true"]
    cpu_request    = "1"
    memory_request = "1Gi"
  }
}
`))
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	p := mustApply(t, e, s)
	if len(p.Desired) < 7 {
		t.Fatalf("the stack rendered %d objects, want a package's, a quota's and two workloads'", len(p.Desired))
	}
	for _, ref := range p.Desired {
		kind, err := objects.KindOf(ref.Group, ref.Kind)
		if err != nil {
			t.Fatal(err)
		}
		client := dyn.Resource(kind.GVR).Namespace(ref.Namespace)
		// Controllers keep writing status: compare a version both have.
		var diff string
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			live, err := engine.Live(ctx, e, ref)
			if err != nil || live == nil {
				return false, err
			}
			server, err := client.Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if live.GetResourceVersion() != server.GetResourceVersion() {
				return false, nil
			}
			diff = cmp.Diff(withOnlyOwnFieldSets(server).Object, live.Object)
			return true, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if diff != "" {
			t.Errorf("%s as plan sees it differs from the API server's (-server +view):\n%s", ref, diff)
		}
	}
}

// withOnlyOwnFieldSets is obj with the field sets of managers other than
// gpuslice's apply left out, as the view keeps it.
func withOnlyOwnFieldSets(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	mfs := obj.GetManagedFields()
	for i := range mfs {
		if mfs[i].Manager != objects.FieldManager {
			mfs[i].FieldsV1 = nil
		}
	}
	obj.SetManagedFields(mfs)
	return obj
}
