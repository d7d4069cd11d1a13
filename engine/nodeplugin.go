package engine

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/render"
)

// guardNodePluginRemoval refuses a plan that deletes the node plugin's
// DaemonSet while pods hold gpuslice slices: without a plugin their claims
// can never be unprepared, and their nodes keep the slices' files and
// accounting. gpuslice_platform's force_destroy, applied (or in the
// configuration being planned), lets it through.
func (e *Engine) guardNodePluginRemoval(ctx context.Context, p *plan.Plan) error {
	var removed *plan.Change
	for i, c := range p.Changes {
		if c.Action == plan.Delete && c.Ref.Kind == "DaemonSet" && c.Ref.Name == render.NodePluginDaemonSet {
			removed = &p.Changes[i]
		}
	}
	if removed == nil || e.forceDestroy(ctx, p, removed.Ref.Namespace) {
		return nil
	}
	// Only the nodes this plugin serves: another one (a chart install) may
	// serve the rest.
	served := map[string]bool{}
	if removed.Live != nil {
		ds, err := daemonSet(removed.Live)
		if err != nil {
			return err
		}
		selector := ds.Spec.Template.Spec.NodeSelector
		nodes, err := e.Clients.Typed.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(selector).String()})
		if err != nil {
			return fmt.Errorf("list the nodes the node plugin serves before removing it: %w", err)
		}
		for _, n := range nodes.Items {
			served[n.Name] = true
		}
	}
	claims, err := e.Clients.Typed.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list the claims the node plugin prepared before removing it: %w", err)
	}
	var held []string
	for _, c := range claims.Items {
		if c.Status.Allocation == nil || len(c.Status.ReservedFor) == 0 {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			// gpuslice's pools are its nodes
			if r.Driver == contract.DriverName && served[r.Pool] {
				held = append(held, fmt.Sprintf("%s/%s (pod %s on %s)", c.Namespace, c.Name, c.Status.ReservedFor[0].Name, r.Pool))
				break
			}
		}
	}
	if len(held) == 0 {
		return nil
	}
	more := ""
	if len(held) > 10 {
		more, held = fmt.Sprintf(" and %d more", len(held)-10), held[:10]
	}
	p.Diagnostics = append(p.Diagnostics, diag.Errorf(removed.Address, "node_plugin", "Pods hold slices of this node plugin",
		"removing the node plugin now would strand the claims %s%s: no plugin would be left to unprepare them. Stop those workloads first, or set force_destroy = true on the gpuslice_platform (and apply it) to remove the plugin anyway",
		strings.Join(held, ", "), more))
	return nil
}

// forceDestroy reports whether the platform allows removing its node
// plugin: in the configuration planned, or as applied.
func (e *Engine) forceDestroy(ctx context.Context, p *plan.Plan, namespace string) bool {
	for _, c := range p.Changes {
		if c.Ref.Kind == "ConfigMap" && c.Ref.Name == render.PlatformConfigMap && !c.Rendered.None() {
			cm, err := c.DesiredObject()
			if err != nil {
				return false
			}
			v, _, _ := unstructured.NestedString(cm.Object, "data", "forceDestroy")
			return v == "true"
		}
	}
	cm, err := e.Clients.Typed.CoreV1().ConfigMaps(namespace).Get(ctx, render.PlatformConfigMap, metav1.GetOptions{})
	return err == nil && cm.Data["forceDestroy"] == "true"
}
