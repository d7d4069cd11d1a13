package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/internal/cluster"
)

// A replacement whose old pods cannot stop (their node has no kubelet to
// confirm it) gives up after its timeout, naming the pods, their node and
// how to free them, instead of waiting forever; once they are gone the
// same apply goes through.
func TestStuckReplacementNamesItsPods(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	const node = "replace-stuck-node"
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: node}); err != nil {
		t.Fatal(err)
	}
	gpu := &draproof.Proof{Client: c.Client(), Node: node, Model: "NVIDIA A100-SXM4-40GB"}
	if _, err := gpu.PublishGPU(ctx, 25); err != nil {
		t.Fatal(err)
	}
	hcl := func(image string) string {
		return strings.Replace(stackHCL("stuck", `
resource "gpuslice_workload" "train" {
  namespace = gpuslice_quota.q.namespace
  name      = "train"
  package   = gpuslice_package.small.name
  kind      = "job"
  wait_for  = "none"
  container {
    image          = "`+image+`"
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`), "Tesla V100-PCIE-32GB", "NVIDIA A100-SXM4-40GB", 1)
	}
	mustApply(t, e, loadStack(t, "stuck", hcl("pytorch/pytorch:2.4.1")))
	pods := c.Client().CoreV1().Pods("stuck")
	var bound string
	for deadline := time.Now().Add(60 * time.Second); bound == ""; time.Sleep(200 * time.Millisecond) {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "job-name=train"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			if p.Spec.NodeName == node {
				bound = p.Name
			}
		}
		if bound == "" && time.Now().After(deadline) {
			t.Fatalf("the job's pod was not bound to %s within 60s: %d pods", node, len(list.Items))
		}
	}

	s := loadStack(t, "stuck", hcl("pytorch/pytorch:2.5.0"))
	err := e.Apply(ctx, mustPlan(t, e, s), apply.Options{ReplaceTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("the replacement went through although the old pod cannot stop")
	}
	for _, want := range []string{"Job stuck/train", "still being deleted after 2s", bound + " (node " + node + ")", "kubectl delete pod -n stuck --force"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	// What the error says to do frees the replacement.
	if err := pods.Delete(ctx, bound, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	mustApply(t, e, s)
	job, err := c.Client().BatchV1().Jobs("stuck").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := job.Spec.Template.Spec.Containers[0].Image; got != "pytorch/pytorch:2.5.0" {
		t.Errorf("job image %s after the replacement", got)
	}
	requireNoChanges(t, e, s)
}
