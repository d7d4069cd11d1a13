package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/simnode"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// No other test of this package publishes A100-SXM4-80GBs: the workload's
// slice lands on cli-health-node.
const healthConfig = `
resource "gpuslice_package" "whole" {
  name      = "clihealth-80gi"
  gpu_model = "NVIDIA A100-SXM4-80GB"
  fraction  = 100
}
resource "gpuslice_quota" "q" {
  namespace       = "clihealth"
  slices          = { (gpuslice_package.whole.name) = 1 }
  cpu_requests    = "1"
  memory_requests = "1Gi"
}
resource "gpuslice_workload" "infer" {
  namespace = gpuslice_quota.q.namespace
  name      = "infer"
  package   = gpuslice_package.whole.name
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "100m"
    memory_request = "256Mi"
  }
}
`

// TestStatusShowsGPUHealth: once the kubelet reports a workload's slice
// unhealthy (without a message, as a kubelet that passes none on) and the
// node plugin taints its GPU, `gpuslice status` says which workload's
// device is unhealthy and why (the GPU's taint), and lists that GPU with
// its health, taint and the slice on it; the other GPU, healthy and
// holding nothing of the stack, is not listed.
func TestStatusShowsGPUHealth(t *testing.T) {
	c := clustertest.Shared(t)
	ctx := context.Background()
	opts := publish.Options{Fractions: []int{100}}
	n, err := simnode.Start(ctx, c, "cli-health-node", simulate.Spec{Profile: "a100-sxm4-80gb", Count: 2}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if _, err := simnode.Published(ctx, c.Client(), []*simnode.Node{n}, time.Now(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + c.KubeconfigPath}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(healthConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(t, env, "apply", dir, "-stack", "clihealth", "-auto-approve"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	t.Cleanup(func() { run(t, env, "destroy", dir, "-stack", "clihealth", "-auto-approve") })

	cs := c.Client()
	var pod *corev1.Pod
	var claim, device string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("clihealth").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 1 || len(pods.Items[0].Status.ResourceClaimStatuses) != 1 {
			return false, err
		}
		pod = &pods.Items[0]
		claim = *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
		cl, err := cs.ResourceV1().ResourceClaims("clihealth").Get(ctx, claim, metav1.GetOptions{})
		if err != nil || cl.Status.Allocation == nil {
			return false, err
		}
		device = cl.Status.Allocation.Devices.Results[0].Device
		return cl.Status.Allocation.Devices.Results[0].Pool == n.Name, nil
	})
	if err != nil {
		t.Fatalf("the workload's slice on %s: %v", n.Name, err)
	}
	gpu := strings.Split(device, "-")[1] // gpu-<index>-100pct-1
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := cs.CoreV1().Pods("clihealth").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
			AllocatedResourcesStatus: []corev1.ResourceStatus{{Name: corev1.ResourceName("claim:" + render.ClaimName), Resources: []corev1.ResourceHealth{{
				ResourceID: corev1.ResourceID(contract.DriverName + "/" + n.Name + "/" + device), Health: corev1.ResourceHealthStatusUnhealthy,
			}}}},
		}}
		_, err = cs.CoreV1().Pods("clihealth").UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	index := 0
	if gpu == "1" {
		index = 1
	}
	n.PublishTainted(opts, publish.Taints{n.UUID(index): {{Key: contract.TaintUnhealthy, Value: "xid-79", Effect: resourcev1.DeviceTaintEffectNoSchedule}}})

	unhealthy := "gpuslice_workload.infer: pod " + pod.Name + ", container " + pod.Spec.Containers[0].Name + ": device " + n.Name + "/" + device +
		" (claim clihealth/" + claim + ") is Unhealthy: GPU " + gpu + " of node " + n.Name + " is unhealthy (xid-79)"
	row := regexp.MustCompile(regexp.QuoteMeta(n.Name) + ` +` + gpu + ` +NVIDIA A100-SXM4-80GB +` + regexp.QuoteMeta("unhealthy: xid-79 (NoSchedule)") + ` +` +
		regexp.QuoteMeta("gpuslice.dev/unhealthy=xid-79:NoSchedule (node plugin)") + ` +clihealth/` + regexp.QuoteMeta(claim) + `\n`)
	var out string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var code int
		out, code = run(t, env, "status", dir, "-stack", "clihealth")
		return code == 0 && strings.Contains(out, unhealthy) && row.MatchString(out), nil
	})
	if err != nil {
		t.Fatalf("status does not show the unhealthy device and its GPU (%v); want %q and a row %s:\n%s", err, unhealthy, row, out)
	}
	if lines := regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(n.Name)+` `).FindAllString(out, -1); len(lines) != 1 {
		t.Errorf("status lists %d GPUs of %s, want only the unhealthy one:\n%s", len(lines), n.Name, out)
	}
	t.Logf("gpuslice status:\n%s", out)
}

// TestStatusWithoutGPUReads: a user who may read the stack's workloads but
// not the cluster's ResourceSlices gets the workloads' status, exit 0, and
// a note that the GPUs are not shown.
func TestStatusWithoutGPUReads(t *testing.T) {
	c := clustertest.Shared(t)
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cliConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := []string{"KUBECONFIG=" + c.KubeconfigPath}
	if out, code := run(t, admin, "apply", dir, "-stack", "noreads", "-auto-approve"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	t.Cleanup(func() { run(t, admin, "destroy", dir, "-stack", "noreads", "-auto-approve") })

	const user = "status-reader"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"", "apps", "batch", "events.k8s.io", "apiextensions.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"deviceclasses", "resourceclaims", "resourceclaimtemplates"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := c.Client().RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client().RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	if _, err := c.Client().RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client().RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}

	out, code := run(t, []string{"KUBECONFIG=" + kubeconfig}, "status", dir, "-stack", "noreads")
	if code != 0 || !strings.Contains(out, "WORKLOAD") || !strings.Contains(out, "GPUs not shown (they need list on ResourceSlices, DeviceTaintRules and every namespace's ResourceClaims): list the ResourceSlices of gpuslice.dev:") ||
		!strings.Contains(out, "forbidden") {
		t.Errorf("status as %s: exit %d, want 0 with the workloads and a note that the GPUs are not shown:\n%s", user, code, out)
	}
	t.Logf("gpuslice status as %s:\n%s", user, out)
}
