package nodes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// A pod the platform's admission policies refuse (a raw nvidia.com/gpu
// request, the way around the slices) is refused by the API server and
// never reaches a kubelet.
func TestRefusedPodNeverReachesKubelet(t *testing.T) {
	env := realnodetest.Shared(t)
	applyStack(t, env, "admit", stackHCL("admit", ""))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "raw-gpu", Namespace: "admit"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: images.SliceCheck,
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
		}}},
	}
	_, err := env.Cluster.Client().CoreV1().Pods("admit").Create(context.Background(), pod, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "gpuslice") {
		t.Fatalf("pod with nvidia.com/gpu in a tenant namespace: error %v, want the platform's refusal", err)
	}
	for _, n := range env.Nodes {
		log, err := os.ReadFile(filepath.Join(n.Dir, "logs", "kubelet.log"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), "raw-gpu") {
			t.Errorf("kubelet of %s heard of the refused pod", n.Name)
		}
	}
}
