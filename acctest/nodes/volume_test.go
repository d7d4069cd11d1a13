package nodes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/internal/hostpath"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// modelJob is a slice-check job with a model volume at /models.
func modelJob(name, script string) string {
	return strings.Replace(sliceCheckJob(name, "small", script), "  container {", `  model_volume {
    size       = "1Gi"
    mount_path = "/models"
  }
  container {`, 1)
}

// A model volume outlives its workload on a real node: a file the container
// wrote into it is read by the container of the workload's next creation,
// after a destroy, from the same PersistentVolumeClaim.
func TestModelVolumeKeepsItsFiles(t *testing.T) {
	env := realnodetest.Shared(t)
	ctx, stopStorage := context.WithCancel(context.Background())
	t.Cleanup(stopStorage)
	if err := hostpath.Start(ctx, env.Cluster.Client(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	pvcs := env.Cluster.Client().CoreV1().PersistentVolumeClaims("volume")

	dir := applyStack(t, env, "volume", stackHCL("volume", modelJob("models", `echo "models pulled once" > /models/marker && echo wrote the marker; exec slice-check --sleep`)))
	first := jobPod(t, env, "volume", "models")
	logsWith(t, env, first, "", "wrote the marker")
	before, err := pvcs.Get(ctx, "models-models", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	destroyStack(t, env, dir, "volume")
	kept, err := pvcs.Get(ctx, "models-models", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("destroy deleted the model volume: %v", err)
	}
	if kept.UID != before.UID {
		t.Fatalf("model volume recreated by destroy: uid %s → %s", before.UID, kept.UID)
	}

	reapply(t, env, dir, "volume", stackHCL("volume", modelJob("models", `read -r m < /models/marker; echo "found: $m"; exec slice-check --sleep`)))
	var second *corev1.Pod
	realnodetest.Eventually(t, 2*time.Minute, "a new pod of job models", func() (bool, string) {
		pods, err := env.Cluster.Client().CoreV1().Pods("volume").List(ctx, metav1.ListOptions{LabelSelector: "job-name=models"})
		if err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			if pods.Items[i].UID != first.UID && pods.Items[i].DeletionTimestamp == nil {
				second = &pods.Items[i]
				return true, ""
			}
		}
		return false, "only the first pod"
	})
	logsWith(t, env, second, "", "found: models pulled once")
	after, err := pvcs.Get(ctx, "models-models", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID {
		t.Errorf("the workload's next creation got a new volume: uid %s → %s", before.UID, after.UID)
	}
}
