package objects_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// A rendered client-go object is held encoded: it converts to what the
// object itself converts to (emptyDir: {} and quantities included), and
// does not follow later changes to the value it was rendered from.
func TestRenderedObjectsAreHeldEncoded(t *testing.T) {
	d := liveDeployment()
	d.ResourceVersion, d.ManagedFields = "", nil
	pod := &d.Spec.Template.Spec
	pod.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Containers[0].Args = []string{}
	pod.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}

	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	objects.Prune(m)
	want := &unstructured.Unstructured{Object: m}
	want.SetGroupVersionKind(deploymentKind)

	o := objects.New("gpuslice_workload.ollama", d, "apps/v1", "Deployment")
	d.Spec.Template.Spec.Containers[0].Image = "changed-after-rendering"
	got, err := o.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Object, got.Object); diff != "" {
		t.Errorf("rendered object as applied (-the object's conversion +held):\n%s", diff)
	}
	if ref := o.Ref(); ref.Namespace != "team-a" || ref.Name != "ollama" || ref.Kind != "Deployment" {
		t.Errorf("Ref: %+v", ref)
	}
}
