package quickstart

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/acctest/internal/tofutest"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// TestTrainingWithOpenTofu applies examples/training on a node publishing
// two whole GPUs: both workers of the indexed Job get their GPU (two
// different ones) and the rendezvous environment, a second plan is empty,
// and three workers on a quota of two fail at plan, naming the gang.
func TestTrainingWithOpenTofu(t *testing.T) {
	c := clustertest.Shared(t)
	ctx := context.Background()
	const node, model = "train-node", "Tesla V100-SXM2-32GB"
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: node}); err != nil {
		t.Fatal(err)
	}
	gpu := &draproof.Proof{Client: c.Client(), Node: node, Model: model}
	if _, err := gpu.PublishGPUs(ctx, 2, 100); err != nil {
		t.Fatal(err)
	}
	run := tofutest.In(t, tofutest.Example(t, "training"), tofuEnv(t, c, "TF_VAR_gpu_model="+model))

	if out, code := run("init", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("tofu init: exit %d\n%s", code, out)
	}
	// The gang of three cannot fit two granted GPUs. The quota is created
	// in the same run, so the provider's plan cannot see it yet: the
	// check runs again when apply plans the workload after the quota, and
	// stops it before any worker is created.
	out, code := run("apply", "-auto-approve", "-input=false", "-no-color", "-var", "workers=3")
	if code == 0 || !strings.Contains(flat(out), "Gang does not fit the quota") ||
		!strings.Contains(flat(out), "3 workers × 1 train-v100-32gi slices need 3, but ResourceQuota gpuslice in research grants 2") {
		t.Fatalf("apply of three workers: exit %d, want the gang refused\n%s", code, out)
	}
	if _, err := c.Client().BatchV1().Jobs("research").Get(ctx, "ddp", metav1.GetOptions{}); err == nil {
		t.Fatal("the Job of the refused gang was created")
	}
	// With the quota applied, plan itself refuses the gang.
	out, code = run("plan", "-input=false", "-no-color", "-var", "workers=3")
	if code == 0 || !strings.Contains(flat(out), "3 workers × 1 train-v100-32gi slices need 3, but ResourceQuota gpuslice in research grants 2") {
		t.Fatalf("plan of three workers: exit %d, want the gang refused\n%s", code, out)
	}

	out, code = run("apply", "-auto-approve", "-input=false", "-no-color")
	if code != 0 || !strings.Contains(out, "Apply complete! Resources: 1 added") {
		t.Fatalf("tofu apply: exit %d\n%s", code, out)
	}
	if out, _ := run("output", "-raw", "devices"); !strings.HasPrefix(out, "gpu-") || !strings.HasSuffix(out, "-100pct-1") {
		t.Errorf("output devices = %q, want a whole GPU", out)
	}

	// Both workers are bound with their own claim on a GPU of their own,
	// and carry their rank and the rendezvous.
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := c.Client().CoreV1().Pods("research").List(ctx, metav1.ListOptions{LabelSelector: "job-name=ddp"})
		if err != nil {
			return false, err
		}
		pods = list.Items
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName == node {
				bound++
			}
		}
		return bound == 2, nil
	})
	if err != nil {
		t.Fatalf("both workers bound to %s: %v (%d pods)", node, err, len(pods))
	}
	devices := map[string]bool{}
	for _, p := range pods {
		rank := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		env := map[string]corev1.EnvVar{}
		for _, v := range p.Spec.Containers[0].Env {
			env[v.Name] = v
		}
		if env["MASTER_ADDR"].Value != "ddp-0.ddp-workers.research.svc" || env["WORLD_SIZE"].Value != "2" || env["PET_NNODES"].Value != "2" ||
			env["PET_NPROC_PER_NODE"].Value != "1" || env["MASTER_PORT"].Value != "29500" || env["RANK"].ValueFrom == nil {
			t.Errorf("worker %s (rank %s): rendezvous environment %+v", p.Name, rank, p.Spec.Containers[0].Env)
		}
		if p.Spec.Hostname != "ddp-"+rank || p.Spec.Subdomain != "ddp-workers" {
			t.Errorf("worker %s: hostname %q subdomain %q", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
		claim, err := c.Client().ResourceV1().ResourceClaims("research").Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil || claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
			t.Fatalf("worker %s's claim: %v %+v", p.Name, err, claim)
		}
		devices[claim.Status.Allocation.Devices.Results[0].Device] = true
	}
	if len(devices) != 2 {
		t.Errorf("the two workers got devices %v, want two different GPUs", devices)
	}

	if out, code := run("plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("second plan: exit %d (want 0: no changes)\n%s", code, out)
	}
	if out, code := run("destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 || !strings.Contains(out, "Destroy complete! Resources: 3 destroyed") {
		t.Fatalf("tofu destroy: exit %d\n%s", code, out)
	}
}

// flat joins the words of tofu's wrapped output.
func flat(out string) string { return strings.Join(strings.Fields(out), " ") }
