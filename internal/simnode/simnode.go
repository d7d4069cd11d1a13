// Package simnode runs simulated GPU nodes on the local control plane for
// tests and benchmarks that need many nodes cheaply: a Node object with no
// kubelet (pods bound to it never run) whose GPUs are published by the
// node plugin's own code — discovery of simulated V100s through go-nvml's
// mock, publish.Build, and the resourceslice controller that the kubelet
// plugin helper runs — so the scheduler sees exactly what a real node
// plugin would publish.
package simnode

import (
	"context"
	"fmt"
	"slices"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// Node is a simulated node publishing its GPUs.
type Node struct {
	Name string
	// Devices are the names of the devices the node publishes.
	Devices []string
	gpus    []discovery.GPU
	ctrl    *resourceslice.Controller
}

// Start registers a Ready node on c named name with the simulated GPUs of
// gpus and starts publishing them as o says, without waiting for the
// slices (Published waits for every node's).
func Start(ctx context.Context, c *cluster.Cluster, name string, gpus simulate.Spec, o publish.Options) (*Node, error) {
	n, err := c.AddNode(ctx, cluster.NodeSpec{Name: name})
	if err != nil {
		return nil, err
	}
	found, err := discovery.Discover(simulate.New(gpus, name))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	resources := publish.Build(name, found.GPUs, o)
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: contract.DriverName, KubeClient: c.Client(),
		Owner:     &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: name, UID: n.UID},
		Resources: &resources,
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: publish: %w", name, err)
	}
	return &Node{Name: name, Devices: names(publish.Devices(found.GPUs, o)), gpus: found.GPUs, ctrl: ctrl}, nil
}

// Publish makes the node offer its GPUs as o says instead (the slices
// change as a restarted plugin with other flags would change them).
func (n *Node) Publish(o publish.Options) { n.PublishTainted(o, nil) }

// PublishTainted is Publish with taints on the devices of GPUs, by UUID, as
// the node plugin taints an unhealthy GPU's.
func (n *Node) PublishTainted(o publish.Options, taints publish.Taints) {
	resources := publish.BuildTainted(n.Name, n.gpus, o, taints)
	n.Devices = names(publish.Devices(n.gpus, o))
	n.ctrl.Update(&resources)
}

// UUID is the UUID of the node's GPU of that index.
func (n *Node) UUID(index int) string {
	for _, g := range n.gpus {
		if g.Index == index {
			return g.UUID
		}
	}
	return ""
}

func names(devs []publish.Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.Name
	}
	slices.Sort(out)
	return out
}

// Stop stops publishing; the slices stay until the Node goes.
func (n *Node) Stop() { n.ctrl.Stop() }

// Published waits until the API server holds exactly the devices of nodes
// and returns how long that took from start. It watches the slices rather
// than listing them again and again: at hundreds of nodes a list every
// tick would load the API server it measures.
func Published(ctx context.Context, client kubernetes.Interface, nodes []*Node, start time.Time, timeout time.Duration) (time.Duration, error) {
	want := map[string][]string{}
	for _, n := range nodes {
		want[n.Name] = n.Devices
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = resourcev1.ResourceSliceSelectorDriver + "=" + contract.DriverName
	}))
	slicesInformer := factory.Resource().V1().ResourceSlices().Informer()
	ctx, cancel := context.WithCancel(ctx)
	defer factory.Shutdown()
	defer cancel()
	factory.Start(ctx.Done())
	var missing int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if !slicesInformer.HasSynced() {
			missing = len(want)
			return false, nil
		}
		got := map[string][]string{}
		for _, obj := range slicesInformer.GetStore().List() {
			s := obj.(*resourcev1.ResourceSlice)
			if s.Spec.NodeName == nil {
				continue
			}
			for _, d := range s.Spec.Devices {
				got[*s.Spec.NodeName] = append(got[*s.Spec.NodeName], d.Name)
			}
		}
		missing = 0
		for name, w := range want {
			g := got[name]
			slices.Sort(g)
			if !slices.Equal(g, w) {
				missing++
			}
		}
		return missing == 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for %d simulated nodes' ResourceSlices: %d not published: %w", len(nodes), missing, err)
	}
	return time.Since(start), nil
}
