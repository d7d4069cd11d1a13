package nodes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// forgedHCL is a platform, an any-size package of 6 GiB/20 % and
// time-sliced packages of two and of four per GPU of the simulated V100,
// and a quota for namespace ns, plus the given workloads.
func forgedHCL(ns, workloads string) string {
	return `
resource "gpuslice_platform" "this" {}

resource "gpuslice_package" "small" {
  name          = "` + ns + `-6gi"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "6Gi"
  compute_share = 20
}

resource "gpuslice_package" "pair" {
  name      = "` + ns + `-pair"
  gpu_model = "Tesla V100-PCIE-32GB"
  sharing   = "time-sliced"
  replicas  = 2
}

resource "gpuslice_package" "quad" {
  name      = "` + ns + `-quad"
  gpu_model = "Tesla V100-PCIE-32GB"
  sharing   = "time-sliced"
  replicas  = 4
}

resource "gpuslice_quota" "team" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.small.name) = 2, (gpuslice_package.pair.name) = 1, (gpuslice_package.quad.name) = 1 }
  cpu_requests    = "2"
  memory_requests = "2Gi"
}
` + workloads
}

// With the platform's admission policies deleted, a tenant's claim for
// more than its package (30 GiB and all the compute of a 6 GiB/20 % any-size
// package; 24 GiB/80 % beside a running 6 GiB slice; a four-per-GPU
// time-sliced package's claim asking two-per-GPU shares beside a running
// pair) is allocated by the scheduler and refused by the node plugin at
// prepare: the pod's container never starts, the pod has the kubelet's
// FailedPrepareDynamicResources Event and the claim a Prepared=False
// condition, both with the reason, and the correct slice on the same GPU
// keeps running with the same CDI spec and limits.
func TestPrepareRefusesMoreThanThePackage(t *testing.T) {
	env := realnodetest.Shared(t)
	const ns = "forged"
	dir := applyStack(t, env, ns, forgedHCL(ns, ""))
	deletePolicies(t, env, ns)
	// every apply restores the policies: delete them again after each
	reapplyBare := func(workloads string) {
		reapply(t, env, dir, ns, forgedHCL(ns, workloads))
		deletePolicies(t, env, ns)
	}
	node := env.Nodes[0]
	small, quad := ns+"-6gi", ns+"-quad"

	// alone on the GPU: 30 GiB and 100 %, what a tenant once ran this way
	refused := forgedPod(t, env, ns, "forged-30", small, map[string]string{"memory": "30Gi", "compute": "100"})
	event, condition := waitPrepareRefused(t, env, node, refused)
	for _, want := range []string{"asks for package " + small + " (6Gi of memory and 20% compute of a Tesla V100-PCIE-32GB) but was allocated 30Gi of memory and 100% compute",
		"capacity memory: 6Gi and compute: 20"} {
		if !strings.Contains(event, want) || !strings.Contains(condition, want) {
			t.Errorf("the refusal does not say %q:\nevent: %s\ncondition: %s", want, event, condition)
		}
	}
	deleteForged(t, env, refused)

	// beside a correct 6 GiB slice on the same GPU
	reapplyBare(sliceCheckJob("good", "small", showSlice))
	good := jobPod(t, env, ns, "good")
	logsWith(t, env, good, "", "slice-check: the slice held")
	goodUID := claimUID(t, env, good)
	held, n := sliceOnNode(t, node, goodUID), restarts(t, env, good)
	refused = forgedPod(t, env, ns, "forged-24", small, map[string]string{"memory": "24Gi", "compute": "80"})
	waitPrepareRefused(t, env, node, refused)
	if restarts(t, env, good) != n {
		t.Errorf("the correct slice's container restarted when the claim beside it was refused")
	}
	if now := sliceOnNode(t, node, goodUID); now != held {
		t.Errorf("the correct slice changed when the claim beside it was refused:\nbefore %s\nafter  %s", held, now)
	}
	deleteForged(t, env, refused)
	reapplyBare("")
	waitUnprepared(t, node, goodUID)

	// a time-sliced claim asking another package's shares, beside a pair's
	script := `nvidia-smi; echo shared; exec slice-check --hold 1`
	reapplyBare(sliceCheckJob("pair", "pair", script))
	shared := jobPod(t, env, ns, "pair")
	logsWith(t, env, shared, "", "shared")
	sharedUID := claimUID(t, env, shared)
	held, n = sliceOnNode(t, node, sharedUID), restarts(t, env, shared)
	refused = forgedPod(t, env, ns, "forged-shares", quad, map[string]string{contract.CapacityShares: fmt.Sprint(contract.SharesOf(2))})
	event, condition = waitPrepareRefused(t, env, node, refused)
	if want := "(250000 shares of a time-sliced Tesla V100-PCIE-32GB (one of 4 per GPU)) but was allocated 500000 shares"; !strings.Contains(event, want) || !strings.Contains(condition, want) {
		t.Errorf("the refusal does not say %q:\nevent: %s\ncondition: %s", want, event, condition)
	}
	if restarts(t, env, shared) != n {
		t.Errorf("the pair's container restarted when the claim beside it was refused")
	}
	if now := sliceOnNode(t, node, sharedUID); now != held {
		t.Errorf("the pair's slice changed when the claim beside it was refused:\nbefore %s\nafter  %s", held, now)
	}
	deleteForged(t, env, refused)
}

// deletePolicies deletes the admission policies and bindings the stack
// rendered, and waits until the API server admits a claim they refuse.
func deletePolicies(t *testing.T, env *realnodetest.Env, stack string) {
	t.Helper()
	ctx := context.Background()
	client := env.Cluster.Client().AdmissionregistrationV1()
	sel := metav1.ListOptions{LabelSelector: "gpuslice.dev/stack=" + stack}
	bindings, err := client.ValidatingAdmissionPolicyBindings().List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bindings.Items {
		if err := client.ValidatingAdmissionPolicyBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policies, err := client.ValidatingAdmissionPolicies().List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range policies.Items {
		if err := client.ValidatingAdmissionPolicies().Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(policies.Items) == 0 {
		t.Fatalf("stack %s rendered no admission policies to delete", stack)
	}
	t.Logf("deleted %d admission policies and %d bindings", len(policies.Items), len(bindings.Items))
}

// forged is a tenant's claim and the pod using it, of one name.
type forged struct{ ns, name string }

// forgedPod creates, in the tenant's namespace, a claim on class asking
// capacity (what the admission policies would refuse) and a pod using it;
// it waits until the API server admits the claim (the policies' deletion
// has reached its admission).
func forgedPod(t *testing.T, env *realnodetest.Env, ns, name, class string, capacity map[string]string) forged {
	t.Helper()
	ctx := context.Background()
	client := env.Cluster.Client()
	requests := map[resourcev1.QualifiedName]resource.Quantity{}
	for k, v := range capacity {
		requests[resourcev1.QualifiedName(k)] = resource.MustParse(v)
	}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: 1, Capacity: &resourcev1.CapacityRequirements{Requests: requests}},
		}}}},
	}
	realnodetest.Eventually(t, time.Minute, "the API server admitting claim "+name, func() (bool, string) {
		_, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
		return err == nil, errString(err)
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:  corev1.RestartPolicyNever,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name)}},
			Containers: []corev1.Container{{
				Name: "c", Image: images.SliceCheck, Command: []string{"sh", "-c", "nvidia-smi; exec slice-check --hold 1"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Claims:   []corev1.ResourceClaim{{Name: "gpu"}},
				},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := forged{ns: ns, name: name}
	t.Cleanup(func() { deleteForged(t, env, f) })
	return f
}

// waitPrepareRefused waits for the kubelet's FailedPrepareDynamicResources
// Event on the pod and the plugin's Prepared=False condition on its claim,
// and returns their messages; the pod's container has not started, and
// the node holds no CDI spec or accounting directory of the claim.
func waitPrepareRefused(t *testing.T, env *realnodetest.Env, node *realnode.Node, f forged) (event, condition string) {
	t.Helper()
	ctx := context.Background()
	client := env.Cluster.Client()
	realnodetest.Eventually(t, 2*time.Minute, "the kubelet's FailedPrepareDynamicResources Event on pod "+f.name, func() (bool, string) {
		list, err := client.CoreV1().Events(f.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + f.name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Reason == "FailedPrepareDynamicResources" {
				event = e.Message
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, "\n")
	})
	var claim *resourcev1.ResourceClaim
	realnodetest.Eventually(t, time.Minute, "the Prepared=False condition on claim "+f.name, func() (bool, string) {
		var err error
		if claim, err = client.ResourceV1().ResourceClaims(f.ns).Get(ctx, f.name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		for _, d := range claim.Status.Devices {
			if c := meta.FindStatusCondition(d.Conditions, driver.ConditionPrepared); d.Driver == contract.DriverName && c != nil && c.Status == metav1.ConditionFalse {
				if c.Reason != driver.ReasonNotItsPackage {
					t.Errorf("claim %s refused for reason %s, want %s", f.name, c.Reason, driver.ReasonNotItsPackage)
				}
				condition = c.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", claim.Status.Devices)
	})
	t.Logf("pod %s, Event FailedPrepareDynamicResources: %s", f.name, event)
	t.Logf("claim %s, condition Prepared=False %s: %s", f.name, driver.ReasonNotItsPackage, condition)
	if !strings.Contains(event, condition) {
		t.Errorf("the pod's Event does not carry the claim's reason:\nevent: %s\ncondition: %s", event, condition)
	}
	pod, err := client.CoreV1().Pods(f.ns).Get(ctx, f.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodPending || pod.Spec.NodeName != node.Name {
		t.Errorf("pod %s is %s on %q, want Pending on %s", pod.Name, pod.Status.Phase, pod.Spec.NodeName, node.Name)
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running != nil || s.State.Terminated != nil || s.RestartCount > 0 {
			t.Errorf("pod %s: container %s started: %+v", pod.Name, s.Name, s.State)
		}
	}
	for _, path := range []string{filepath.Join(node.CDIDir(), cdispec.SpecName(string(claim.UID))), filepath.Join(node.AccountingDir(), string(claim.UID))} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("the refused claim left %s on the node (%v)", path, err)
		}
	}
	return event, condition
}

// deleteForged deletes the pod and its claim and waits until both are gone.
func deleteForged(t *testing.T, env *realnodetest.Env, f forged) {
	t.Helper()
	ctx := context.Background()
	client := env.Cluster.Client()
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	if err := client.CoreV1().Pods(f.ns).Delete(ctx, f.name, now); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	if err := client.ResourceV1().ResourceClaims(f.ns).Delete(ctx, f.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	realnodetest.Eventually(t, 2*time.Minute, "pod and claim "+f.name+" gone", func() (bool, string) {
		_, podErr := client.CoreV1().Pods(f.ns).Get(ctx, f.name, metav1.GetOptions{})
		_, claimErr := client.ResourceV1().ResourceClaims(f.ns).Get(ctx, f.name, metav1.GetOptions{})
		return apierrors.IsNotFound(podErr) && apierrors.IsNotFound(claimErr), fmt.Sprintf("pod: %v, claim: %v", podErr, claimErr)
	})
}

// sliceOnNode is what the node holds of a prepared claim: its CDI spec,
// and its accounting region's limits where it has one.
func sliceOnNode(t *testing.T, node *realnode.Node, uid string) string {
	t.Helper()
	spec, err := os.ReadFile(filepath.Join(node.CDIDir(), cdispec.SpecName(uid)))
	if err != nil {
		t.Fatal(err)
	}
	limits := "no region"
	if r, err := accounting.ReadFile(filepath.Join(node.AccountingDir(), uid, contract.RegionFile)); err == nil {
		limits = fmt.Sprintf("memory limit %d, compute share %d", r.MemoryLimit, r.ComputeShare)
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return limits + "; spec " + string(spec)
}

// restarts is how often the pod's running container has restarted.
func restarts(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) int32 {
	t.Helper()
	// The kubelet reports the container running after its first output
	// may already be readable: wait for the report.
	var p *corev1.Pod
	realnodetest.Eventually(t, time.Minute, "pod "+pod.Name+" reports its container running", func() (bool, string) {
		var err error
		if p, err = env.Cluster.Client().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			return false, fmt.Sprintf("%s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return true, ""
	})
	return p.Status.ContainerStatuses[0].RestartCount
}
