package objects_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

var deploymentKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

func liveDeployment() *appsv1.Deployment {
	replicas := int32(2)
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "ollama", Namespace: "team-a", ResourceVersion: "42",
			Labels:      map[string]string{objects.LabelWorkload: "ollama", objects.LabelStack: "prod"},
			Annotations: map[string]string{objects.AnnotationAddress: "gpuslice_workload.ollama"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: objects.FieldManager, Operation: metav1.ManagedFieldsOperationApply,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)}}},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "ollama", Image: "ollama/ollama:0.24.0"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3},
	}
}

func TestEncodedDecodesToTheSameObject(t *testing.T) {
	d := liveDeployment()
	e, ok, err := objects.Encode(d, deploymentKind, objects.LabelWorkload)
	if err != nil || !ok {
		t.Fatalf("Encode: %v, %v", ok, err)
	}
	got, err := e.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("decoded object differs (-live +decoded):\n%s", diff)
	}
	again, _ := e.Decode()
	if got == again {
		t.Error("Decode returned the same object twice: a caller that changes one changes the other's")
	}
}

// The store's keys, indexes and barriers read name, namespace,
// resourceVersion and the indexed labels without decoding.
func TestEncodedKeepsWhatTheStoreReads(t *testing.T) {
	e, _, err := objects.Encode(liveDeployment(), deploymentKind, objects.LabelWorkload, "absent")
	if err != nil {
		t.Fatal(err)
	}
	if e.GetName() != "ollama" || e.GetNamespace() != "team-a" || e.GetResourceVersion() != "42" {
		t.Errorf("metadata kept: %s/%s at %s", e.GetNamespace(), e.GetName(), e.GetResourceVersion())
	}
	if want := map[string]string{objects.LabelWorkload: "ollama"}; !cmp.Equal(e.GetLabels(), want) {
		t.Errorf("labels kept: %v, want %v", e.GetLabels(), want)
	}
	if e.GetObjectKind().GroupVersionKind() != deploymentKind {
		t.Errorf("kind: %v", e.GetObjectKind().GroupVersionKind())
	}
	if e.GetAnnotations() != nil || e.GetManagedFields() != nil {
		t.Error("annotations or managedFields kept beside the encoding: they are in it")
	}
}

func TestOnlyClientGoTypesAreEncoded(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gpuslice.dev/v1", "kind": "Package", "metadata": map[string]any{"name": "p"}}}
	if _, ok, err := objects.Encode(u, u.GroupVersionKind()); ok || err != nil {
		t.Fatalf("an unstructured object was encoded (%v, %v): it has no protobuf encoding", ok, err)
	}
	got, err := objects.Decoded(u)
	if err != nil || got != u {
		t.Errorf("Decoded changed an object that is not encoded: %v, %v", got, err)
	}
}

// A store's objects are never changed: setting metadata an encoded object
// does not keep is a bug, said at once rather than lost.
func TestEncodedRefusesMetadataItDoesNotKeep(t *testing.T) {
	e, _, err := objects.Encode(liveDeployment(), deploymentKind, objects.LabelWorkload)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("SetAnnotations on an encoded object did not panic: the annotations would be lost")
		}
	}()
	e.SetAnnotations(map[string]string{"a": "b"})
}

func TestEncodedCopyKeepsItsOwnLabels(t *testing.T) {
	e, _, err := objects.Encode(liveDeployment(), deploymentKind, objects.LabelWorkload)
	if err != nil {
		t.Fatal(err)
	}
	c := e.DeepCopyObject().(*objects.Encoded)
	c.SetLabels(map[string]string{objects.LabelWorkload: "other"})
	if got := e.GetLabels()[objects.LabelWorkload]; got != "ollama" {
		t.Errorf("changing a copy's labels changed the original's: %q", got)
	}
	if c.GetName() != "ollama" || c.GetObjectKind().GroupVersionKind() != deploymentKind {
		t.Errorf("copy: %s, %v", c.GetName(), c.GetObjectKind().GroupVersionKind())
	}
}
