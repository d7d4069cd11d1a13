package engine_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

func volumeHCL(ns, kind, replicas, extra string) string {
	return stackHCL(ns, `
resource "gpuslice_workload" "llm" {
  namespace = gpuslice_quota.q.namespace
  name      = "llm"
  package   = gpuslice_package.small.name
  kind      = "`+kind+`"
  replicas  = `+replicas+`
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
  model_volume {
    size       = "1Gi"
    mount_path = "/root/.ollama"
    `+extra+`
  }
}
`)
}

// Item 6 of issue 17: destroying or replacing a workload keeps its model
// volume (the same PersistentVolumeClaim, by UID) and the workload's next
// creation takes it back; delete_on_destroy = true deletes it.
func TestModelVolumeOutlivesItsWorkload(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	pvcs := c.Client().CoreV1().PersistentVolumeClaims("keepvol")
	s := loadStack(t, "keepvol", volumeHCL("keepvol", "deployment", "0", ""))
	mustApply(t, e, s)
	pvc, err := pvcs.Get(ctx, "llm-models", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := pvc.UID
	// A marker a model download would leave (no node writes files here).
	if _, err := pvcs.Patch(ctx, pvc.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"test/marker":"llama3.2:3b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// Destroy: the volume is released, not deleted.
	p, err := e.PlanDestroy(ctx, "keepvol")
	if err != nil {
		t.Fatal(err)
	}
	if text := planText(p); !strings.Contains(text, "PersistentVolumeClaim keepvol/llm-models keeps existing, released (model volume kept") {
		t.Fatalf("destroy plan:\n%s", text)
	}
	if err := e.Destroy(ctx, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	pvc, err = pvcs.Get(ctx, "llm-models", metav1.GetOptions{})
	if err != nil || pvc.UID != uid || pvc.Labels[objects.LabelStack] != "" || pvc.Annotations[objects.AnnotationKeptFor] != "gpuslice_workload.llm" {
		t.Fatalf("after destroy the volume is %+v (%v)", pvc, err)
	}

	// Re-created, as a Job this time (another controller kind): the same
	// volume, with its marker, back in the stack without -adopt.
	job := loadStack(t, "keepvol", volumeHCL("keepvol", "job", "1", ""))
	mustApply(t, e, job)
	pvc, err = pvcs.Get(ctx, "llm-models", metav1.GetOptions{})
	if err != nil || pvc.UID != uid || pvc.Annotations["test/marker"] != "llama3.2:3b" || pvc.Labels[objects.LabelStack] != "keepvol" {
		t.Fatalf("after re-creating the workload the volume is %+v (%v)", pvc, err)
	}
	requireNoChanges(t, e, job)

	// With delete_on_destroy = true destroy deletes it.
	del := loadStack(t, "keepvol", volumeHCL("keepvol", "job", "1", "delete_on_destroy = true"))
	mustApply(t, e, del)
	p, err = e.PlanDestroy(ctx, "keepvol")
	if err != nil {
		t.Fatal(err)
	}
	if text := planText(p); !strings.Contains(text, "PersistentVolumeClaim keepvol/llm-models will be destroyed") {
		t.Fatalf("destroy plan with delete_on_destroy:\n%s", text)
	}
	if err := e.Destroy(ctx, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	if pvc, err := pvcs.Get(ctx, "llm-models", metav1.GetOptions{}); err == nil && pvc.DeletionTimestamp == nil {
		t.Fatalf("delete_on_destroy kept the volume: %+v", pvc)
	}
}
