package quickstart

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/acctest/internal/tofutest"
	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/hostpath"
	"github.com/gpuslice/gpuslice/internal/simnode"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestAnySizeWithOpenTofu applies examples/any-size with OpenTofu on a
// node whose two V100s the node plugin's own code publishes as any-size and
// time-sliced devices: both any-size workloads get shares of one GPU's
// any-size device (claims asking the packages' exact amounts), the two
// time-sliced replicas share the other GPU, plan says the time-sliced
// package is not isolated, a second plan is empty, and destroy removes it
// all.
func TestAnySizeWithOpenTofu(t *testing.T) {
	c := clustertest.Shared(t)
	ctx := context.Background()
	node, err := simnode.Start(ctx, c, "anysize-node", simulate.Spec{Profile: "v100-32gb", Count: 2}, publish.Options{AnySize: true, TimeSliced: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	if _, err := simnode.Published(ctx, c.Client(), []*simnode.Node{node}, time.Now(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	storage, stopStorage := context.WithCancel(ctx)
	t.Cleanup(stopStorage)
	if err := hostpath.Start(storage, c.Client(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	run := tofutest.In(t, tofutest.Example(t, "any-size"), tofuEnv(t, c))
	if out, code := run("init", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("tofu init: exit %d\n%s", code, out)
	}
	out, code := run("apply", "-auto-approve", "-input=false", "-no-color")
	if code != 0 || !strings.Contains(out, "Apply complete! Resources: 7 added") {
		t.Fatalf("tofu apply: exit %d\n%s", code, out)
	}
	if !strings.Contains(flat(out), "Not isolated") || !strings.Contains(flat(out), "v100-shared's 4 slices per GPU each see and may use the whole GPU") {
		t.Errorf("apply does not say the time-sliced package is not isolated:\n%s", out)
	}
	devices, _ := run("output", "-json", "devices")
	got := flat(devices)
	for _, want := range []string{`"small":"gpu-`, `-any-size"`, `"large":"gpu-`, `"evals":"gpu-`, `-time-sliced"`} {
		if !strings.Contains(got, want) {
			t.Errorf("output devices %s lacks %s", got, want)
		}
	}

	// The claims ask exactly the packages' amounts, and got them.
	claims, err := c.Client().ResourceV1().ResourceClaims("inference").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	consumed := map[string]string{}
	for _, cl := range claims.Items {
		if cl.Status.Allocation == nil {
			continue
		}
		r := cl.Status.Allocation.Devices.Results[0]
		m, comp, sh := r.ConsumedCapacity[contract.CapacityMemory], r.ConsumedCapacity[contract.CapacityCompute], r.ConsumedCapacity[contract.CapacityShares]
		consumed[cl.Spec.Devices.Requests[0].Exactly.DeviceClassName] = m.String() + "/" + comp.String() + "/" + sh.String()
	}
	for class, want := range map[string]string{"v100-6gi": "6Gi/20/0", "v100-20gi": "20Gi/60/0", "v100-shared": "0/0/250k"} {
		if consumed[class] != want {
			t.Errorf("claim of %s consumed %q, want %q (memory/compute/shares); all: %v", class, consumed[class], want, consumed)
		}
	}

	if out, code := run("plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("second plan: exit %d (want 0: no changes)\n%s", code, out)
	}
	if out, code := run("destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 || !strings.Contains(out, "Destroy complete! Resources: 7 destroyed") {
		t.Fatalf("tofu destroy: exit %d\n%s", code, out)
	}
	for _, class := range []string{"v100-6gi", "v100-20gi", "v100-shared"} {
		if _, err := c.Client().ResourceV1().DeviceClasses().Get(ctx, class, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("DeviceClass %s after destroy: %v", class, err)
		}
	}
}
