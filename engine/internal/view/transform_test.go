package view

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/render"
)

// The objects of the kinds gpuslice applies are held encoded, with the
// labels the indexes read, and read back whole, minus other managers'
// field sets; those of the checks' kinds stay typed, without managedFields.
func TestAppliedKindsAreHeldEncoded(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "ollama", Namespace: "team-a", ResourceVersion: "7",
		Labels: map[string]string{objects.LabelWorkload: "ollama", render.LabelPreloadFor: "ollama", "app": "ollama"},
		ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: objects.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)},
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)},
		}}}
	held, err := transform(ManagedKind("apps", "Deployment"))(d.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	e, ok := held.(*objects.Encoded)
	if !ok {
		t.Fatalf("held as %T, want *objects.Encoded", held)
	}
	for _, f := range []func(any) ([]string, error){indexers[IndexWorkload], indexers[IndexPreloadFor]} {
		if got, err := f(e); err != nil || len(got) != 1 || got[0] != "team-a/ollama" {
			t.Errorf("index of the encoded object: %v, %v", got, err)
		}
	}
	if again, err := transform(ManagedKind("apps", "Deployment"))(e); err != nil || again != e {
		t.Errorf("a held object transformed again: %v, %v; want it unchanged", again, err)
	}
	objs, err := decoded([]any{e})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := objs[0].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("read as %T, want *appsv1.Deployment", objs[0])
	}
	if got.Labels["app"] != "ollama" || got.ManagedFields[0].FieldsV1 == nil || got.ManagedFields[1].FieldsV1 != nil {
		t.Errorf("read back: labels %v, managedFields %v", got.Labels, got.ManagedFields)
	}
	if got.Kind != "Deployment" || got.APIVersion != "apps/v1" {
		t.Errorf("read back without its kind: %q %q", got.APIVersion, got.Kind)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a", ManagedFields: d.ManagedFields}}
	heldPod, err := transform(Pods)(pod)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := heldPod.(*corev1.Pod); !ok || p.ManagedFields != nil {
		t.Errorf("a pod held as %T with managedFields; want *corev1.Pod without", heldPod)
	}
}
