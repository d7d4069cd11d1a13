package engine_test

import (
	"cmp"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/internal/cluster"
)

// TestUpdatesInTenantNamespaces checks the update paths: relabelling a
// claim to another package is refused, while the updates controllers make
// (annotations, finalizers) pass — even on a claim of the wrong shape that
// existed before its namespace became a tenant, whose deletion must never
// be blocked. `kubectl debug` cannot add a privileged ephemeral container
// to a tenant's pod.
func TestUpdatesInTenantNamespaces(t *testing.T) {
	a := admission(t)
	_, cl := newEngine(t)
	ctx := context.Background()
	claims := cl.Client().ResourceV1().ResourceClaims(admissionTenant)
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "update-me", Labels: map[string]string{"gpuslice.dev/package": "adm-8gi"}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "adm-8gi", Count: 1}}}}},
	}
	if _, err := claims.Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := claims.Patch(ctx, "update-me", types.MergePatchType, []byte(`{"metadata":{"annotations":{"note":"x"},"finalizers":["example.com/keep"]}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("annotation and finalizer update refused: %v", err)
	}
	_, err := claims.Patch(ctx, "update-me", types.MergePatchType, []byte(`{"metadata":{"labels":{"gpuslice.dev/package":"adm-16gi"}}}`), metav1.PatchOptions{})
	if policyDenial(err) != render.PolicyClaimShape || !strings.Contains(err.Error(), "is 'adm-16gi' but the claim requests class 'adm-8gi'") {
		t.Errorf("relabelling to another package: want the claim-shape refusal, got %v", err)
	}
	if _, err := claims.Patch(ctx, "update-me", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("finalizer removal refused: %v", err)
	}

	// A claim with selectors made before its namespace became a tenant.
	const legacy = "adm-legacy"
	if _, err := cluster.CreateNamespace(ctx, cl.Client(), legacy, nil); err != nil {
		t.Fatal(err)
	}
	old := claim.DeepCopy()
	old.Name = "legacy"
	old.Finalizers = []string{"example.com/keep"}
	old.Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "true"}}}
	if _, err := cl.Client().ResourceV1().ResourceClaims(legacy).Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Client().CoreV1().Namespaces().Patch(ctx, legacy, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+admissionTenantLabel+`":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	selectors, err := readManifest("testdata/admission/hostile/claim-selectors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Any gpuslice refusal (the grants policy finds no quota here) shows
	// the policies now select the namespace.
	for deadline := time.Now().Add(30 * time.Second); policyDenial(a.dryRun(ctx, legacy, selectors.obj)) == ""; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become a tenant namespace for the policies within 30s", legacy)
		}
	}
	if _, err := cl.Client().ResourceV1().ResourceClaims(legacy).Patch(ctx, "legacy", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("finalizer removal on a claim older than the tenant label refused: %v", err)
	}

	// kubectl debug on a running pod.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "debug-me"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}},
	}
	pods := cl.Client().CoreV1().Pods(admissionTenant)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The scheduler binds the pod meanwhile: retry on its conflicts.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		latest.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "busybox:1.36", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}
		_, err = pods.UpdateEphemeralContainers(ctx, pod.Name, latest, metav1.UpdateOptions{})
		return err
	})
	if policyDenial(err) != render.PolicySliceIsolation || !strings.Contains(err.Error(), "container debugger is privileged") {
		t.Errorf("privileged ephemeral container: want the slice-isolation refusal, got %v", err)
	}
}

// TestExtendedResourcePodGetsItsSlices runs pods asking for packages by
// extended resource name, as the tenant user, on a node publishing three
// simulated L4 GPUs. Pods the scheduler's claim could not serve are
// refused when they are created, with what to do: two slices of a
// fraction (the node would refuse such a claim), a package the namespace
// is not granted, more whole GPUs than the grant. Whole GPUs within the
// grant, and one slice of a fraction, are bound: kube-scheduler's own claim
// (unlabelled, made for the pod) is admitted for who made it. The same
// claim made by the admin or the tenant is refused.
func TestExtendedResourcePodGetsItsSlices(t *testing.T) {
	a := admission(t)
	_, cl := newEngine(t)
	ctx := context.Background()
	const node = "adm-l4-node"
	if _, err := cl.AddNode(ctx, cluster.NodeSpec{Name: node}); err != nil {
		t.Fatal(err)
	}
	gpu := &draproof.Proof{Client: cl.Client(), Node: node, Model: "NVIDIA L4"}
	if _, err := gpu.PublishGPUs(ctx, 3, 25, 50, 100); err != nil {
		t.Fatal(err)
	}
	tenant, _ := a.tenantClients(t, "alice")
	pods := tenant.CoreV1().Pods(admissionTenant)
	extendedPod := func(name string, resourceName corev1.ResourceName, n string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{resourceName: resource.MustParse(n)},
				}}}},
		}
	}

	for _, c := range []struct {
		name     string
		resource corev1.ResourceName
		n        string
		policy   string
		message  string
	}{
		{"fraction-two", "gpuslice.dev/adm-l4", "2", render.PolicyExtendedResources,
			"the pod asks for 2 of adm-l4 (container app asks for 2 of gpuslice.dev/adm-l4), a fractional package (25 %): a slice's memory and compute limits are one budget on one GPU, so a pod gets one slice of it: ask for 1 in all"},
		{"ungranted", "deviceclass.resource.kubernetes.io/adm-l4-half", "1", render.PolicyExtendedGrants,
			"resources[deviceclass.resource.kubernetes.io/adm-l4-half]: the pod asks for 1, but class adm-l4-half is not granted to namespace " + admissionTenant},
		{"over-grant", "gpuslice.dev/adm-l4-whole", "4", render.PolicyExtendedGrants,
			"the pod asks for 4, but namespace " + admissionTenant + "'s gpuslice quota grants 3 of gpuslice.dev/adm-l4-whole: ask for at most that many"},
	} {
		_, err := pods.Create(ctx, extendedPod(c.name, c.resource, c.n), metav1.CreateOptions{})
		if policyDenial(err) != c.policy || !strings.Contains(err.Error(), c.message) {
			t.Errorf("pod asking for %s of %s: want refused by %s with …%s…, got %v", c.n, c.resource, c.policy, c.message, err)
		}
	}

	bound := func(pod *corev1.Pod, devices int) *resourcev1.ResourceClaim {
		t.Helper()
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("pod %s: %v", pod.Name, err)
		}
		t.Cleanup(func() {
			_ = cl.Client().CoreV1().Pods(admissionTenant).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		})
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Spec.NodeName != "" {
				if p.Spec.NodeName != node {
					t.Errorf("pod %s bound to %s, want %s", pod.Name, p.Spec.NodeName, node)
				}
				break
			}
			if time.Now().After(deadline) {
				events, _ := cl.Client().CoreV1().Events(admissionTenant).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
				var msgs []string
				for _, ev := range events.Items {
					msgs = append(msgs, ev.Reason+": "+ev.Message)
				}
				t.Fatalf("pod %s not bound within 60s; conditions %+v; events:\n%s", pod.Name, p.Status.Conditions, strings.Join(msgs, "\n"))
			}
		}
		claims, err := cl.Client().ResourceV1().ResourceClaims(admissionTenant).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range claims.Items {
			if c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] == "true" && len(c.OwnerReferences) == 1 && c.OwnerReferences[0].Name == pod.Name {
				if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != devices {
					t.Errorf("scheduler's claim %s for pod %s not allocated %d devices: %+v", c.Name, pod.Name, devices, c.Status.Allocation)
				}
				return &claims.Items[i]
			}
		}
		t.Fatalf("no claim made by the scheduler for pod %s among %d claims", pod.Name, len(claims.Items))
		return nil
	}
	bound(extendedPod("fraction-one", "gpuslice.dev/adm-l4", "1"), 1)
	made := bound(extendedPod("whole-two", "gpuslice.dev/adm-l4-whole", "2"), 2)

	// The scheduler's claim as it was made, submitted again: only its
	// maker's identity admits it (it has no package label). One device
	// instead of two, so that the quota (3, 2 of them used by the claim
	// itself) leaves room for it.
	made.Spec.Devices.Requests[0].Exactly.Count = 1
	again := &unstructured.Unstructured{}
	again.SetAPIVersion("resource.k8s.io/v1")
	again.SetKind("ResourceClaim")
	again.SetName(made.Name + "-again")
	again.SetAnnotations(made.Annotations)
	again.SetOwnerReferences(made.OwnerReferences)
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&made.Spec)
	if err != nil {
		t.Fatal(err)
	}
	again.Object["spec"] = spec
	if err := a.create(ctx, a.clientAs(cluster.SchedulerUser), admissionTenant, again, true); err != nil {
		t.Errorf("the scheduler's claim, submitted again as %s: %v", cluster.SchedulerUser, err)
	}
	for _, who := range []string{"", "alice"} {
		m := manifest{file: "scheduler's claim", as: who, obj: again}
		err := a.dryRunAs(ctx, admissionTenant, m)
		if policyDenial(err) != render.PolicyClaimShape || !strings.Contains(err.Error(), "metadata.labels["+"gpuslice.dev/package] is '' but the claim requests class 'adm-l4-whole'") {
			t.Errorf("the scheduler's claim submitted again by %q: want the claim-shape refusal of an unlabelled claim, got %v", cmp.Or(who, "the admin"), err)
		}
	}
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestGrantFollowsTheQuota changes the tenant's quota to grant a package
// it did not, and back: claims of it are admitted, then refused again, with
// no change to the policies (they read the quota at admission time).
func TestGrantFollowsTheQuota(t *testing.T) {
	a := admission(t)
	e, _ := newEngine(t)
	ctx := context.Background()
	base, err := os.ReadFile("testdata/admission/stack/main.tf")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := readManifest("testdata/admission/hostile/claim-class-granted-zero.yaml")
	if err != nil {
		t.Fatal(err)
	}
	granted := regexp.MustCompile(`\(gpuslice_package\.whole\.name\)( +)= 0`).ReplaceAllString(string(base), "(gpuslice_package.whole.name)$1= 1")
	if granted == string(base) {
		t.Fatal("the admission stack no longer grants adm-32gi 0 slices; update this test")
	}
	for _, step := range []struct {
		hcl    string
		refuse bool
	}{{granted, false}, {string(base), true}} {
		p := mustApply(t, e, loadStack(t, "admission", step.hcl))
		for _, c := range p.Changes {
			if strings.HasPrefix(c.Ref.Kind, "ValidatingAdmissionPolicy") && c.Action != plan.NoOp {
				t.Errorf("changing a quota changed %s (%s)", c.Ref, c.Action)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := a.dryRun(ctx, admissionTenant, whole.obj)
			if (policyDenial(err) == render.PolicyClaimGrants) == step.refuse && (step.refuse || err == nil) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("quota grants adm-32gi = %v, but a claim of it answers %v", !step.refuse, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
