package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/render"
)

// guardNodePluginRollback refuses a plan that moves the node plugin to a
// release that cannot read the checkpoint of a node it serves: that
// release would stop on the node, and every claim there, partitions
// included, would lose its plugin. What a node's checkpoint needs comes
// from the claims allocated on it, each device's kind as its node plugin
// published it (the scheduler wrote the allocation, the plugin the
// device: nothing a tenant sets); what a release reads comes from
// contract's table, keyed by the version in the image's tag.
func (e *Engine) guardNodePluginRollback(ctx context.Context, p *plan.Plan) error {
	for _, c := range p.Changes {
		if c.Ref.Kind != "DaemonSet" || c.Ref.Name != render.NodePluginDaemonSet || c.Desired == nil || c.Action == plan.NoOp || c.Action == plan.Delete {
			continue
		}
		image, selector, err := pluginImage(c.Desired)
		if err != nil {
			return err
		}
		if c.Live != nil {
			if live, _, err := pluginImage(c.Live); err == nil && live == image {
				continue
			}
		}
		_, tag, _ := render.SplitImage(image)
		stranded, err := e.claimsNeedingCheckpoint(ctx, selector, func(format string) bool {
			return !contract.ReleaseReadsCheckpoint(tag, format)
		})
		if err != nil {
			return err
		}
		if len(stranded) == 0 {
			continue
		}
		p.Diagnostics = append(p.Diagnostics, rollbackRefused(c.Address, image, tag, stranded))
	}
	return nil
}

// pluginImage is the node plugin's image and node selector in a rendered
// or live DaemonSet.
func pluginImage(obj runtime.Object) (string, map[string]string, error) {
	ds, err := daemonSet(obj)
	if err != nil {
		return "", nil, err
	}
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) == 0 {
		return "", nil, fmt.Errorf("the node plugin's DaemonSet %s/%s has no container", ds.Namespace, ds.Name)
	}
	return pod.Containers[0].Image, pod.NodeSelector, nil
}

// daemonSet reads obj, the view's (client-go's type) or rendered
// (unstructured), as a DaemonSet.
func daemonSet(obj runtime.Object) (*appsv1.DaemonSet, error) {
	if ds, ok := obj.(*appsv1.DaemonSet); ok {
		return ds, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("read the node plugin's DaemonSet: %T is no DaemonSet; this is a bug in gpuslice", obj)
	}
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ds); err != nil {
		return nil, fmt.Errorf("read the node plugin's DaemonSet %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &ds, nil
}

// strandedClaim is a claim whose node needs a checkpoint format the target
// release does not read.
type strandedClaim struct {
	ref, node, sharing, format string
}

// claimsNeedingCheckpoint lists the claims allocated on the nodes matching
// selector that need a checkpoint format for which unreadable reports
// true. An allocated claim counts whether or not its pod still runs: the
// plugin keeps it in its checkpoint until the kubelet unprepares it.
func (e *Engine) claimsNeedingCheckpoint(ctx context.Context, selector map[string]string, unreadable func(format string) bool) ([]strandedClaim, error) {
	nodes, err := e.Clients.Typed.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(selector).String()})
	if err != nil {
		return nil, fmt.Errorf("list the nodes the node plugin serves before changing its image: %w", err)
	}
	served := map[string]bool{}
	for _, n := range nodes.Items {
		served[n.Name] = true
	}
	claims, err := e.Clients.Typed.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the claims allocated on the node plugin's nodes before changing its image: %w", err)
	}
	var sharing map[string]string // pool/device → AttrSharing, read once needed
	var out []strandedClaim
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != contract.DriverName || !served[r.Pool] {
				continue
			}
			if sharing == nil {
				if sharing, err = e.publishedSharing(ctx); err != nil {
					return nil, err
				}
			}
			kind := sharingOf(r, sharing)
			format := contract.CheckpointFormatFor(kind)
			if format == "" {
				continue
			}
			if unreadable(format) {
				out = append(out, strandedClaim{ref: c.Namespace + "/" + c.Name, node: r.Pool, sharing: kind, format: format})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ref < out[j].ref })
	return out, nil
}

// publishedSharing maps each gpuslice device published on a node (its
// pool) to how it shares its GPU.
func (e *Engine) publishedSharing(ctx context.Context) (map[string]string, error) {
	slices, err := e.Clients.Typed.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: resourcev1.ResourceSliceSelectorDriver + "=" + contract.DriverName})
	if err != nil {
		return nil, fmt.Errorf("list the node plugin's ResourceSlices before changing its image: %w", err)
	}
	out := map[string]string{}
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes[contract.AttrSharing]; ok && a.StringValue != nil {
				out[s.Spec.Pool.Name+"/"+d.Name] = *a.StringValue
			}
		}
	}
	return out, nil
}

// sharingOf is how an allocated device shares its GPU: as published, or,
// for a device no slice lists any more (its plugin is down), what the
// allocation shows: a share ID is a share of an any-size or time-sliced
// device, and a MIG device's name says so.
func sharingOf(r resourcev1.DeviceRequestAllocationResult, published map[string]string) string {
	if s, ok := published[r.Pool+"/"+r.Device]; ok {
		return s
	}
	switch {
	case r.ShareID != nil:
		return contract.SharingAnySize
	case strings.Contains(r.Device, "-mig-"):
		return contract.SharingMIG
	}
	return contract.SharingPartition
}

// rollbackRefused is the error naming the claims a release would strand
// and what to do.
func rollbackRefused(address, image, tag string, stranded []strandedClaim) diag.Diagnostic {
	names := make([]string, 0, len(stranded))
	for _, s := range stranded {
		names = append(names, fmt.Sprintf("%s (%s, on node %s)", s.ref, s.sharing, s.node))
	}
	more := ""
	if len(names) > 10 {
		more, names = fmt.Sprintf(" and %d more", len(names)-10), names[:10]
	}
	formats := map[string]bool{}
	for _, s := range stranded {
		formats[s.format] = true
	}
	needed := make([]string, 0, len(formats))
	for f := range formats {
		needed = append(needed, f)
	}
	sort.Strings(needed)
	release := fmt.Sprintf("release %s", tag)
	if !contract.IsRelease(tag) {
		release = fmt.Sprintf("an unknown release (tag %q is not a gpuslice version, so it is taken for one before 0.1.0)", tag)
	}
	return diag.Errorf(address, "node_plugin.image", "The node plugin's new image cannot read its nodes' checkpoints",
		"%s is %s, whose node plugin cannot read checkpoint format %s, which the nodes hold for the claims %s%s. "+
			"It would stop on those nodes, and every claim there, partitions included, would lose its node plugin. "+
			"Delete those workloads first (or wait for them to finish) and plan again, or stay on the current image",
		image, release, strings.Join(needed, " and "), strings.Join(names, ", "), more)
}
