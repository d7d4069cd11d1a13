package apply

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
)

// Handing spec.replicas over to an autoscaler. Server-side apply removes a
// field from an object when its only applier stops sending it, so dropping
// replicas from gpuslice's apply would reset the count to 1. As Kubernetes
// documents for transferring ownership to an HPA, another manager first
// applies the current count; gpuslice's next apply without replicas then
// only gives up its share, and the autoscaler scales from what runs.

// handOverReplicas makes FieldManagerReplicas co-own spec.replicas at its
// current value when gpuslice still owns it and the plan leaves it to an
// autoscaler.
func handOverReplicas(ctx context.Context, res dynamic.ResourceInterface, c plan.Change) error {
	// A replaced object is created again with its initial count.
	if c.Live == nil || c.Action == plan.Replace || !plan.Autoscaled(c.Desired) || !ownsReplicas(c.Live) {
		return nil
	}
	// Read it again: the autoscaler may have scaled since the plan.
	cur, err := res.Get(ctx, c.Ref.Name, metav1.GetOptions{})
	if err != nil {
		return wrap(c, err)
	}
	replicas, found, err := unstructured.NestedInt64(cur.Object, "spec", "replicas")
	if err != nil || !found {
		return nil // nothing to keep: the API server defaults it
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": c.Desired.GetAPIVersion(), "kind": c.Desired.GetKind(),
		"metadata": map[string]any{"name": c.Ref.Name, "namespace": c.Ref.Namespace},
		"spec":     map[string]any{"replicas": replicas},
	})
	if err != nil {
		return err
	}
	_, err = res.Patch(ctx, c.Ref.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: objects.FieldManagerReplicas, Force: ptr.To(true)})
	if err != nil {
		return fmt.Errorf("hand spec.replicas of %s over to its autoscaler: %w", c.Ref, err)
	}
	return nil
}

// ownsReplicas reports whether gpuslice's apply owns spec.replicas.
func ownsReplicas(live runtime.Object) bool {
	m, err := meta.Accessor(live)
	if err != nil {
		return false
	}
	replicas := fieldpath.MakePathOrDie("spec", "replicas")
	for _, mf := range m.GetManagedFields() {
		if mf.Manager != objects.FieldManager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err == nil && set.Has(replicas) {
			return true
		}
	}
	return false
}

// withoutHandover drops gpuslice's own handover manager from the managers
// whose edits an apply overwrote: taking replicas back from it when
// autoscaling is turned off is no one's hand edit.
func withoutHandover(managers []string) []string {
	var out []string
	for _, m := range managers {
		if m != objects.FieldManagerReplicas {
			out = append(out, m)
		}
	}
	return out
}
