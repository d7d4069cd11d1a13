package engine_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/acctest/previous"
	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// The previous release's node plugin image, tagged as the upgrade tests
// push it: a build before 0.1.0, which reads checkpoints up to v2.
var previousImage = "registry.test/gpuslice/gpuslice-nodeplugin:0.1.0-" + previous.Commit[:7] +
	"@sha256:5d6e1a1a0b8f3f6b2c1e6b1c8a4e58b3e9f2f0d8c2a7b4e6f1d3c5a7b9e0f1a2"

func withImage(image string) string {
	return strings.Replace(nodePluginBlock, pluginImage, image, 1)
}

// Moving the node plugin to a release that cannot read the checkpoint
// format its nodes hold (v3 for a share of an any-size or time-sliced
// device, v4 for a MIG instance) is refused at plan time, on
// node_plugin.image, naming each such claim and its node and what to do;
// nothing in the cluster changes. Partition claims (v1, v2) do not stop
// it, nor claims on nodes the plugin does not serve; an upgrade to a
// newer release goes through; an image whose tag is no release version
// counts as an old release.
func TestNodePluginRollbackRefusedOverNewerCheckpoints(t *testing.T) {
	c := clustertest.Start(t, cluster.Options{})
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ctx := context.Background()
	client := c.Client()
	gpu := map[string]string{"nvidia.com/gpu.present": "true"}
	for _, n := range []cluster.NodeSpec{{Name: "gpu-node-1", Labels: gpu}, {Name: "gpu-node-2", Labels: gpu}, {Name: "other-node"}} {
		if _, err := c.AddNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	mustApply(t, e, loadStack(t, "np", platformHCL("[25, 50, 100]", "", nodePluginBlock)))
	publishSharing(t, client, "gpu-node-1", map[string]string{"gpu-0-25pct-0": contract.SharingPartition, "gpu-0-any-size": contract.SharingAnySize})
	publishSharing(t, client, "gpu-node-2", map[string]string{"gpu-0-time-sliced": contract.SharingTimeSliced})
	publishSharing(t, client, "other-node", map[string]string{"gpu-0-any-size": contract.SharingAnySize})
	mkNamespace(t, client, "np-roll")

	planTo := func(image string) *plan.Plan {
		t.Helper()
		p, err := e.Plan(ctx, loadStack(t, "np", platformHCL("[25, 50, 100]", "", withImage(image))), plan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	requireAllowed := func(image, why string) {
		t.Helper()
		if p := planTo(image); p.Diagnostics.HasErrors() {
			t.Errorf("moving the node plugin to %s %s was refused: %v", image, why, p.Diagnostics.Err())
		}
	}

	// Partitions only, and a share on a node the plugin does not serve.
	allocate(t, client, "np-roll", "part", "gpu-node-1", "gpu-0-25pct-0")
	allocate(t, client, "np-roll", "elsewhere", "other-node", "gpu-0-any-size")
	requireAllowed(previousImage, "while only partitions are held on its nodes")

	allocate(t, client, "np-roll", "shared", "gpu-node-1", "gpu-0-any-size")
	allocate(t, client, "np-roll", "sliced", "gpu-node-2", "gpu-0-time-sliced")
	// A MIG instance whose slice is gone (its plugin is down): the name says what it is.
	allocate(t, client, "np-roll", "mig", "gpu-node-2", contract.MIGDeviceName(1, "1g.5gb", 0))
	for _, image := range []string{previousImage, "registry.test/gpuslice/gpuslice-nodeplugin:dev"} {
		p := planTo(image)
		if !p.Diagnostics.HasErrors() {
			t.Fatalf("moving the node plugin to %s while claims need checkpoint v3 and v4 was not refused:\n%s", image, planText(p))
		}
		var d = p.Diagnostics[len(p.Diagnostics)-1]
		for _, want := range []string{"np-roll/shared (any-size, on node gpu-node-1)", "np-roll/sliced (time-sliced, on node gpu-node-2)",
			"np-roll/mig (mig, on node gpu-node-2)", "v3 and v4", "Delete those workloads", "stay on the current image"} {
			if !strings.Contains(d.Detail, want) {
				t.Errorf("the refusal of %s does not say %q:\n%s", image, want, d.Detail)
			}
		}
		for _, notWanted := range []string{"np-roll/part", "np-roll/elsewhere"} {
			if strings.Contains(d.Detail, notWanted) {
				t.Errorf("the refusal names %s, which holds nothing the release cannot read:\n%s", notWanted, d.Detail)
			}
		}
		if d.Attribute != "node_plugin.image" || d.Address != "gpuslice_platform.p" {
			t.Errorf("the refusal is on %s %s, want gpuslice_platform.p node_plugin.image", d.Address, d.Attribute)
		}
		if err := e.Apply(ctx, p, apply.Options{}); err == nil {
			t.Fatalf("apply carried out the refused plan to %s", image)
		}
		ds, err := client.AppsV1().DaemonSets("np-sys").Get(ctx, "gpuslice-nodeplugin", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ds.Spec.Template.Spec.Containers[0].Image; got != pluginImage {
			t.Fatalf("after the refused plan the plugin's image is %s, want %s unchanged", got, pluginImage)
		}
	}
	if !strings.Contains(planTo("registry.test/gpuslice/gpuslice-nodeplugin:dev").Diagnostics.Err().Error(), `tag "dev" is not a gpuslice version`) {
		t.Error("the refusal of an image tagged dev does not say its tag is not a version")
	}
	requireAllowed("registry.test/gpuslice/gpuslice-nodeplugin:0.2.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5", "(a newer release)")
	requireNoChanges(t, e, loadStack(t, "np", platformHCL("[25, 50, 100]", "", nodePluginBlock)))

	// Once the workloads are gone, the rollback goes through.
	for _, name := range []string{"shared", "sliced", "mig"} {
		if err := client.ResourceV1().ResourceClaims("np-roll").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	requireAllowed(previousImage, "after the claims needing v3 and v4 were deleted")
}

func mkNamespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// publishSharing records a node plugin's ResourceSlice on node: its devices and
// how each shares its GPU.
func publishSharing(t *testing.T, client kubernetes.Interface, node string, devices map[string]string) {
	t.Helper()
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpuslice"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: contract.DriverName, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
		},
	}
	for name, sharing := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			contract.AttrSharing: {StringValue: ptr.To(sharing)},
		}})
	}
	if _, err := client.ResourceV1().ResourceSlices().Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// allocate records a claim allocated device on node, as the scheduler
// would.
func allocate(t *testing.T, client kubernetes.Interface, ns, name, node, device string) {
	t.Helper()
	ctx := context.Background()
	claim, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "any"},
		}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: contract.DriverName, Pool: node, Device: device,
	}}}}
	if _, err := client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
