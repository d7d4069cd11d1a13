package engine_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/internal/cluster"
)

func trainingHCL(grant, workers int) string {
	return fmt.Sprintf(`
resource "gpuslice_package" "whole" {
  name      = "train-16gi"
  gpu_model = "Tesla V100-PCIE-16GB"
  fraction  = 100
}
resource "gpuslice_quota" "q" {
  namespace       = "train"
  slices          = { (gpuslice_package.whole.name) = %d }
  cpu_requests    = "4"
  memory_requests = "4Gi"
}
resource "gpuslice_workload" "ddp" {
  namespace = gpuslice_quota.q.namespace
  name      = "ddp"
  package   = gpuslice_package.whole.name
  kind      = "job"
  workers   = %d
  wait_for  = "none"
  container {
    image          = "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"
    command        = ["torchrun", "/workspace/train.py"]
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`, grant, workers)
}

// TestTrainingGang: a gang larger than the quota fails at plan; one that
// fits the quota but not the free GPUs is warned about, partly scheduled,
// and its status names the workers that wait and why. The scheduled
// workers carry their rank and the rendezvous environment.
func TestTrainingGang(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	const node = "train-node"
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: node}); err != nil {
		t.Fatal(err)
	}
	gpu := &draproof.Proof{Client: c.Client(), Node: node, Model: "Tesla V100-PCIE-16GB"}
	if _, err := gpu.PublishGPUs(ctx, 2, 100); err != nil {
		t.Fatal(err)
	}

	p, err := e.Plan(ctx, loadStack(t, "train", trainingHCL(2, 3)), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := errorsOf(p.Diagnostics); len(got) != 1 || !strings.HasPrefix(got[0], "gpuslice_workload.ddp.workers: Gang does not fit the quota: "+
		"3 workers × 1 train-16gi slices need 3, but ResourceQuota gpuslice in train grants 2: a gang that only partly fits deadlocks") {
		t.Fatalf("plan errors = %q", got)
	}

	s := loadStack(t, "train", trainingHCL(3, 3))
	p = mustPlan(t, e, s)
	if got := warningsOf(p.Diagnostics); !contains(got, "gpuslice_workload.ddp.package: Not enough free slices now: 2 free train-16gi slices in the cluster now and this workload wants 3") {
		t.Errorf("plan warnings = %q", got)
	}
	if err := e.Apply(ctx, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	partial := regexp.MustCompile(`^2 of 3 workers have slices and hold them while the gang is incomplete; worker [0-2] waits: waiting for a free slice: no train-16gi slice is free on any node`)
	st := pollStatus(t, e, s, "gpuslice_workload.ddp", func(st status.Status) bool { return partial.MatchString(st.Message) })
	if st.Phase != status.Pending || st.Reason != status.WaitingForSlice || st.Attributes()["reason"] != st.Message {
		t.Errorf("partial gang: %s (%s) %q", st.Phase, st.Reason, st.Message)
	}

	pods, err := c.Client().CoreV1().Pods("train").List(ctx, metav1.ListOptions{LabelSelector: "job-name=ddp"})
	if err != nil {
		t.Fatal(err)
	}
	ranks := map[string]bool{}
	for _, pod := range pods.Items {
		rank := pod.Annotations[batchv1.JobCompletionIndexAnnotation]
		ranks[rank] = true
		if pod.Spec.Hostname != "ddp-"+rank || pod.Spec.Subdomain != render.WorkersServiceName(s.Workloads[0]) {
			t.Errorf("pod %s: hostname %q subdomain %q, want ddp-<rank> in %s", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain, render.WorkersServiceName(s.Workloads[0]))
		}
		env := map[string]corev1.EnvVar{}
		for _, v := range pod.Spec.Containers[0].Env {
			env[v.Name] = v
		}
		for name, want := range map[string]string{"MASTER_ADDR": "ddp-0.ddp-workers.train.svc", "MASTER_PORT": "29500", "WORLD_SIZE": "3",
			"PET_MASTER_ADDR": "ddp-0.ddp-workers.train.svc", "PET_MASTER_PORT": "29500", "PET_NNODES": "3", "PET_NPROC_PER_NODE": "1"} {
			if env[name].Value != want {
				t.Errorf("pod %s: %s = %q, want %q", pod.Name, name, env[name].Value, want)
			}
		}
		for _, name := range []string{"RANK", "PET_NODE_RANK"} {
			if f := env[name].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
				t.Errorf("pod %s: %s is not the completion index: %+v", pod.Name, name, env[name])
			}
		}
	}
	if len(ranks) != 3 || !ranks["0"] || !ranks["1"] || !ranks["2"] {
		t.Errorf("ranks of the workers' pods = %v, want 0, 1 and 2", ranks)
	}
	svc, err := c.Client().CoreV1().Services("train").Get(ctx, "ddp-workers", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service: %v %+v", err, svc)
	}
	requireNoChanges(t, e, s)
}
