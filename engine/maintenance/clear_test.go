package maintenance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/maintenance"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/simnode"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestClearHealth: a clear of a node annotates its Node for the GPU the
// node plugin tainted unhealthy only, with the time of the clear, and
// waits until the taint is gone; a healthy GPU has nothing to clear; a
// taint added after this machine's time (a clock behind the node's) is
// refused, since the plugin would find the clear older than the fault.
func TestClearHealth(t *testing.T) {
	c := clustertest.Shared(t)
	cs := c.Client()
	ctx := context.Background()
	node := "clear-node"
	gpuSpec := simulate.Spec{Profile: "v100-32gb", Count: 2}
	o := publish.Options{Fractions: []int{50, 100}}
	n, err := simnode.Start(ctx, c, node, gpuSpec, o)
	if err != nil {
		t.Fatal(err)
	}
	// Its devices go with it: the other tests' classes select any
	// gpuslice device, and would find this node's free.
	t.Cleanup(func() {
		n.Stop()
		if err := cs.ResourceV1().ResourceSlices().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}); err != nil {
			t.Errorf("delete the slices of node %s: %v", node, err)
		}
	})
	found, err := discovery.Discover(simulate.New(gpuSpec, node))
	if err != nil {
		t.Fatal(err)
	}
	gpu0 := found.GPUs[0].UUID
	taint := func(added time.Time) publish.Taints {
		return publish.Taints{gpu0: {{Key: contract.TaintUnhealthy, Value: "xid-79", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: &metav1.Time{Time: added}}}}
	}
	n.PublishTainted(o, taint(time.Now().Add(-time.Minute)))
	waitFor(t, "GPU 0 listed unhealthy", func() (bool, error) {
		gpus, err := maintenance.List(ctx, cs)
		for _, g := range gpus {
			if g.Node == node && g.Index == 0 {
				return g.Health == "unhealthy: xid-79 (NoExecute)", err
			}
		}
		return false, err
	})

	if cl, err := maintenance.ClearHealth(ctx, cs, maintenance.Target{Node: node, GPU: "1"}, time.Now()); err != nil || len(cl.GPUs) != 0 {
		t.Fatalf("clear of the healthy GPU 1: %+v, %v; want nothing cleared", cl, err)
	}
	now := time.Now()
	cl, err := maintenance.ClearHealth(ctx, cs, maintenance.Target{Node: node}, now)
	if err != nil || len(cl.GPUs) != 1 || cl.GPUs[0].UUID != gpu0 || cl.Reasons[gpu0] != "xid-79" {
		t.Fatalf("clear of node %s: %+v, %v; want GPU 0 (xid-79) cleared", node, cl, err)
	}
	nd, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range nd.Annotations {
		if strings.HasPrefix(k, contract.HealthClearedPrefix) {
			keys = append(keys, k)
		}
	}
	if len(keys) != 1 || keys[0] != contract.HealthClearedAnnotation(gpu0) || nd.Annotations[keys[0]] != now.UTC().Format(time.RFC3339Nano) {
		t.Fatalf("node annotations %v, want only %s=%s", nd.Annotations, contract.HealthClearedAnnotation(gpu0), now.UTC().Format(time.RFC3339Nano))
	}

	// no plugin here to read the clear: the wait names what is left
	if _, err := maintenance.WaitUntilUntainted(ctx, cs, cl, time.Second); err == nil || !strings.Contains(err.Error(), "GPU(s) 0 ("+gpu0+") still tainted") {
		t.Errorf("wait with the taint still published: %v", err)
	}
	n.PublishTainted(o, nil) // as the plugin does once it reads the clear
	if _, err := maintenance.WaitUntilUntainted(ctx, cs, cl, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	n.PublishTainted(o, taint(time.Now().Add(time.Hour)))
	waitFor(t, "GPU 0 tainted again", func() (bool, error) {
		gpus, err := maintenance.List(ctx, cs)
		for _, g := range gpus {
			if g.Node == node && g.Index == 0 {
				return g.Health != "healthy", err
			}
		}
		return false, err
	})
	if _, err := maintenance.ClearHealth(ctx, cs, maintenance.Target{Node: node, GPU: gpu0}, time.Now()); err == nil || !strings.Contains(err.Error(), "this clock is behind the node's") {
		t.Errorf("clear with this clock an hour behind the taint's: %v", err)
	}
	if _, err := maintenance.ClearHealth(ctx, cs, maintenance.Target{Node: node, GPU: "5"}, time.Now()); err == nil || !strings.Contains(err.Error(), "has no GPU 5") {
		t.Errorf("clear of a GPU the node does not have: %v", err)
	}
}
