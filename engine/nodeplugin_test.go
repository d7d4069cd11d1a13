package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

const pluginImage = "registry.test/gpuslice/gpuslice-nodeplugin:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5"

func platformHCL(fractions, extra, nodePlugin string) string {
	return `
resource "gpuslice_platform" "p" {
  namespace          = "np-sys"
  admission_policies = false
  fractions          = ` + fractions + `
` + extra + `
` + nodePlugin + `
}
`
}

const nodePluginBlock = `
  node_plugin {
    image          = "` + pluginImage + `"
    simulated_gpus = "v100-32gb:1"
    env            = { KUBERNETES_SERVICE_HOST = "127.0.0.1" }
  }`

// The platform installs the node plugin from its chart: DaemonSet,
// ServiceAccount, RBAC and own-node policy, with the platform's fractions
// in the plugin's arguments (one source of truth); a fractions change rolls
// it; removing it while pods hold slices is refused, naming them, unless
// force_destroy is applied.
func TestPlatformInstallsNodePlugin(t *testing.T) {
	// A cluster of its own: the platform's cluster-wide objects are the
	// admission tests' too.
	c := clustertest.Start(t, cluster.Options{})
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ctx := context.Background()
	client := c.Client()
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: "gpu-node-1", Labels: map[string]string{"nvidia.com/gpu.present": "true"}}); err != nil {
		t.Fatal(err)
	}
	s := loadStack(t, "np", platformHCL("[25, 50, 100]", "", nodePluginBlock))
	p := mustApply(t, e, s)
	kinds := map[string]bool{}
	for _, ch := range p.Changes {
		kinds[ch.Ref.Kind] = true
	}
	for _, k := range []string{"DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		if !kinds[k] {
			t.Errorf("the platform created no %s for the node plugin", k)
		}
	}
	args := func() []string {
		ds, err := client.AppsV1().DaemonSets("np-sys").Get(ctx, "gpuslice-nodeplugin", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ds.Spec.Template.Spec.Containers[0].Image; got != pluginImage {
			t.Errorf("plugin image %q, want %q", got, pluginImage)
		}
		return ds.Spec.Template.Spec.Containers[0].Args
	}
	// prepare checks each claim against its package's DeviceClass
	role, err := client.RbacV1().ClusterRoles().Get(ctx, "gpuslice-nodeplugin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "deviceclasses") && slices.Equal(r.Verbs, []string{"get", "list", "watch"})
	}) {
		t.Errorf("the node plugin's role %v may not get, list and watch deviceclasses", role.Rules)
	}
	if a := args(); !slices.Contains(a, "--fractions=25,50,100") || !slices.Contains(a, "--simulate=v100-32gb:1") {
		t.Errorf("plugin arguments %v lack the platform's fractions or the simulated GPUs", a)
	}
	requireNoChanges(t, e, s)

	s = loadStack(t, "np", platformHCL("[25, 100]", "", nodePluginBlock))
	p = mustPlan(t, e, s)
	if !strings.Contains(planText(p), "DaemonSet np-sys/gpuslice-nodeplugin") {
		t.Errorf("a fractions change does not change the plugin's DaemonSet:\n%s", planText(p))
	}
	if err := e.Apply(ctx, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	if a := args(); !slices.Contains(a, "--fractions=25,100") {
		t.Errorf("plugin arguments %v after the fractions change", a)
	}

	// A pod holds a slice: removing the block is refused, naming it.
	holdSlice(t, client)
	without := loadStack(t, "np", platformHCL("[25, 100]", "", ""))
	p, err = e.Plan(ctx, without, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Diagnostics.HasErrors() || !strings.Contains(p.Diagnostics.Err().Error(), "np-held/held") || !strings.Contains(p.Diagnostics.Err().Error(), "force_destroy") {
		t.Fatalf("removing the node plugin while a pod holds a slice: diagnostics %v, want an error naming np-held/held and force_destroy", p.Diagnostics)
	}
	if err := e.Apply(ctx, p, apply.Options{}); err == nil {
		t.Fatal("apply removed the node plugin while a pod holds a slice")
	}
	d, err := e.PlanDestroy(ctx, "np")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Destroy(ctx, d, apply.Options{}); err == nil || !strings.Contains(err.Error(), "np-held/held") {
		t.Fatalf("destroy while a pod holds a slice: %v, want a refusal naming the claim", err)
	}

	// force_destroy, applied, lets it go.
	mustApply(t, e, loadStack(t, "np", platformHCL("[25, 100]", "force_destroy = true", nodePluginBlock)))
	d, err = e.PlanDestroy(ctx, "np")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Destroy(ctx, d, apply.Options{}); err != nil {
		t.Fatalf("destroy with force_destroy: %v", err)
	}
	if _, err := client.AppsV1().DaemonSets("np-sys").Get(ctx, "gpuslice-nodeplugin", metav1.GetOptions{}); err == nil {
		t.Error("the node plugin's DaemonSet survived the destroy")
	}
}

// holdSlice records a claim allocated a gpuslice slice and reserved for a
// pod, as the scheduler would.
func holdSlice(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "np-held"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), "np-held", metav1.DeleteOptions{})
	})
	claim, err := client.ResourceV1().ResourceClaims("np-held").Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "held"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "any"},
		}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The pod it is reserved for, bound to a node without a kubelet: it
	// stays as it is, holding the claim.
	pod, err := client.CoreV1().Pods("np-held").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer"},
		Spec: corev1.PodSpec{
			NodeName:       "gpu-node-1",
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("held")}},
			Containers: []corev1.Container{{Name: "c", Image: "trainer:1",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status = resourcev1.ResourceClaimStatus{
		Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: "gpuslice.dev", Pool: "gpu-node-1", Device: "gpu-0-25pct-0",
		}}}},
		ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}},
	}
	if _, err := client.ResourceV1().ResourceClaims("np-held").UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.ResourceV1().ResourceClaims("np-held").Delete(context.Background(), "held", metav1.DeleteOptions{})
	})
}
