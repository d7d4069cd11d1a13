package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	enginerender "github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/kubeletsim"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestRBACAndPolicy runs the plugin with the manifests' service account,
// through a token bound to a pod on node A as the DaemonSet's pod would get:
// the role is enough to publish node A's slices, and the admission policy
// refuses a slice for node B.
func TestRBACAndPolicy(t *testing.T) {
	c := clustertest.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := c.Client()
	if _, err := cluster.CreateNamespace(ctx, admin, namespace, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objects(t) {
		var err error
		switch v := o.(type) {
		case *corev1.ServiceAccount:
			_, err = admin.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = admin.RbacV1().ClusterRoles().Create(ctx, v, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, v, metav1.CreateOptions{})
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, v, metav1.CreateOptions{})
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, v, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// the DaemonSet's pod on node A, and the token the kubelet would mount
	pod, err := admin.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gpuslice-nodeplugin-a"},
		Spec: corev1.PodSpec{ServiceAccountName: "gpuslice-nodeplugin", NodeName: "node-a",
			Containers: []corev1.Container{{Name: "plugin", Image: "gpuslice-nodeplugin"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "gpuslice-nodeplugin", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		ExpirationSeconds: ptr.To[int64](3600),
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(&rest.Config{Host: c.Host, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData}})

	dir := t.TempDir()
	shimLib := filepath.Join(dir, "libgpuslice.so")
	os.WriteFile(shimLib, []byte("stand-in"), 0o644)
	gpus := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 1}, "node-a")
	p, err := driver.Start(ctx, driver.LocalDirs(driver.Config{SimulatedGPUs: true,
		NodeName: "node-a", Client: sa, NVML: nvml.Interface(gpus),
		Publish: publish.Options{Fractions: contract.DefaultFractions}, ShimSource: shimLib,
	}, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"})
		return err == nil && len(list.Items) == 2, err
	})
	if err != nil {
		t.Fatalf("the plugin, as its service account, did not publish node-a's slices: %v", err)
	}

	// An operator's clear of a GPU's health taint, an annotation on the
	// Node: the plugin, as its service account, watches its Node.
	if n, err := simulate.InjectXID(gpus, 0, 79); err != nil || n != 1 {
		t.Fatalf("inject XID 79: reached %d event sets, %v", n, err)
	}
	healthTaints := func(want int) error {
		return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"})
			n := 0
			for _, s := range list.Items {
				for _, d := range s.Spec.Devices {
					n += len(d.Taints)
				}
			}
			return err == nil && n == want, err
		})
	}
	if err := healthTaints(7); err != nil {
		t.Fatalf("GPU 0's 7 devices not tainted after an XID: %v", err)
	}
	clear := `{"metadata":{"annotations":{"` + contract.HealthClearedAnnotation(p.GPUs()[0].UUID) + `":"` + time.Now().Format(time.RFC3339Nano) + `"}}}`
	if _, err := admin.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, []byte(clear), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := healthTaints(0); err != nil {
		t.Errorf("the plugin, as its service account, did not read the clear on its Node: %v", err)
	}
	if _, err := sa.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, []byte(clear), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("annotating its Node as the plugin: %v, want forbidden", err)
	}

	// Another node's slice is refused by the policy (once it is active).
	foreign := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign"},
		Spec: resourcev1.ResourceSliceSpec{Driver: contract.DriverName, NodeName: ptr.To("node-b"),
			Pool: resourcev1.ResourcePool{Name: "node-b", ResourceSliceCount: 1}},
	}
	var refusal error
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, refusal = sa.ResourceV1().ResourceSlices().Create(ctx, foreign, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); refusal != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if refusal == nil || !strings.Contains(refusal.Error(), "may only write ResourceSlices of that node") {
		t.Errorf("a slice for node-b was not refused by the policy: %v", refusal)
	}
	if _, err := sa.ResourceV1().ResourceClaims(namespace).Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a claim as the plugin: %v, want forbidden", err)
	}

	// Warning Events on its Node (a rebuilt checkpoint, an open toolkit
	// configuration) are the plugin's to record.
	event := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-a-checkpoint-", Namespace: metav1.NamespaceDefault},
		EventTime:  metav1.NewMicroTime(time.Now()), ReportingController: "gpuslice.dev/nodeplugin", ReportingInstance: "gpuslice-nodeplugin-node-a",
		Action: "RebuildCheckpoint", Reason: driver.EventReasonCheckpointRebuilt, Type: corev1.EventTypeWarning,
		Regarding: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-a"}, Note: "rebuilt",
	}
	if _, err := sa.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, event, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("recording an Event on its Node as the plugin: %v", err)
	}

	// Prepare checks each claim against its package: the plugin reads and
	// watches device classes.
	if _, err := sa.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing device classes as the plugin: %v", err)
	}
	if w, err := sa.ResourceV1().DeviceClasses().Watch(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("watching device classes as the plugin: %v", err)
	} else {
		w.Stop()
	}

	// A workload's claim on node A: the plugin prepares it (reading its
	// package's class) and, through the resourceclaims/driver rule, reports
	// the slice in the claim's status.
	claim := allocatedClaim(t, ctx, admin, "node-a")
	k, err := kubeletsim.Dial(filepath.Join(dir, "plugin", "dra.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := k.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := admin.ResourceV1().ResourceClaims(namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		return err == nil && len(c.Status.Devices) == 1 && c.Status.Devices[0].Data != nil, err
	})
	if err != nil {
		t.Errorf("the plugin, as its service account, did not report the claim's device status: %v", err)
	}
}

// allocatedClaim has the scheduler allocate a slice of a 25 % package on
// node to a pod and returns the pod's claim.
func allocatedClaim(t *testing.T, ctx context.Context, client kubernetes.Interface, node string) *resourcev1.ResourceClaim {
	t.Helper()
	pkg := &spec.Package{Name: "rbac-25pct", GPUModel: simulate.V100PCIe32GB.Name, Fraction: 25}
	_, err := client.ResourceV1().DeviceClasses().Create(ctx, enginerender.DeviceClass(pkg), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.ResourceV1().ResourceClaims(namespace).Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "app-gpu"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "rbac-25pct", Count: 1}}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"kubernetes.io/hostname": node},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("app-gpu")}},
			Containers:     []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var claim *resourcev1.ResourceClaim
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		claim, err = client.ResourceV1().ResourceClaims(namespace).Get(ctx, "app-gpu", metav1.GetOptions{})
		return err == nil && claim.Status.Allocation != nil && len(claim.Status.ReservedFor) > 0, err
	})
	if err != nil {
		t.Fatalf("claim not allocated on %s: %v", node, err)
	}
	return claim
}
