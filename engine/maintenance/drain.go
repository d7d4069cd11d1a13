package maintenance

import (
	"context"
	"fmt"
	"sort"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/contract"
)

// Drained is what a drain did.
type Drained struct {
	Target Target
	Effect resourcev1.DeviceTaintEffect
	// GPUs are the GPUs drained.
	GPUs []*GPU
	// Rules are the DeviceTaintRules that taint them, by name; Changed
	// those created or updated by this drain.
	Rules, Changed []string
}

// Drain taints every device of the target's GPUs with NoSchedule, or
// NoExecute when evict is set: the scheduler places no new slice there
// and, with NoExecute, the device taint eviction controller deletes the
// pods using them. A node-wide drain is one rule per pool of the node (it
// covers devices the node publishes later, too); a GPU's is one rule per
// device of it, since a rule selects devices by pool and name only. It is
// idempotent: a second drain changes a rule only where the effect differs,
// and removes its own rules of devices the GPU no longer publishes.
func Drain(ctx context.Context, cs kubernetes.Interface, t Target, evict bool) (*Drained, error) {
	effect := resourcev1.DeviceTaintEffectNoSchedule
	if evict {
		effect = resourcev1.DeviceTaintEffectNoExecute
	}
	gpus, err := nodeGPUs(ctx, cs, t.Node)
	if err != nil {
		return nil, err
	}
	if len(gpus) == 0 {
		return nil, noGPUs(t.Node)
	}
	var want []*resourcev1.DeviceTaintRule
	gpuUUID := ""
	if t.GPU == "" {
		pools := map[string]bool{}
		for _, g := range gpus {
			for _, d := range g.Devices {
				if !pools[d.Pool] {
					pools[d.Pool] = true
					want = append(want, desired(t.Node, nil, d.Pool, "", effect))
				}
			}
		}
	} else {
		g, err := pick(gpus, t)
		if err != nil {
			return nil, err
		}
		gpus, gpuUUID = []*GPU{g}, g.UUID
		for _, d := range g.Devices {
			want = append(want, desired(t.Node, g, d.Pool, d.Name, effect))
		}
	}
	out := &Drained{Target: t, Effect: effect, GPUs: gpus}
	rules := cs.ResourceV1().DeviceTaintRules()
	keep := map[string]bool{}
	for _, r := range want {
		keep[r.Name] = true
		out.Rules = append(out.Rules, r.Name)
		changed, err := apply(ctx, rules, r)
		if err != nil {
			return nil, fmt.Errorf("drain %s: %w", t, err)
		}
		if changed {
			out.Changed = append(out.Changed, r.Name)
		}
	}
	// A node-wide drain leaves the node's GPU rules alone (undrain of the
	// node removes them); a GPU's drain prunes its rules of devices gone.
	if t.GPU != "" {
		old, err := owned(ctx, cs, t.Node, gpuUUID)
		if err != nil {
			return nil, err
		}
		for _, r := range old {
			if !keep[r.Name] {
				if err := rules.Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("drain %s: delete DeviceTaintRule %s of a device no longer published: %w", t, r.Name, err)
				}
			}
		}
	}
	return out, nil
}

// apply creates r or brings an existing rule of its name to r's selector
// and taint; it reports whether it changed anything.
func apply(ctx context.Context, rules ruleClient, r *resourcev1.DeviceTaintRule) (bool, error) {
	_, err := rules.Create(ctx, r, metav1.CreateOptions{})
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create DeviceTaintRule %s: %w", r.Name, err)
	}
	cur, err := rules.Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("read DeviceTaintRule %s: %w", r.Name, err)
	}
	if cur.Labels[LabelDrain] != "true" {
		return false, fmt.Errorf("DeviceTaintRule %s exists and is not gpuslice's (no label %s=true): rename or delete it", r.Name, LabelDrain)
	}
	if cur.Spec.Taint.Key == r.Spec.Taint.Key && cur.Spec.Taint.Value == r.Spec.Taint.Value && cur.Spec.Taint.Effect == r.Spec.Taint.Effect &&
		sameSelector(cur.Spec.DeviceSelector, r.Spec.DeviceSelector) {
		return false, nil
	}
	cur.Spec = r.Spec // TimeAdded empty: the API server stamps the change of effect
	cur.Annotations, cur.Labels = r.Annotations, r.Labels
	if _, err := rules.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("update DeviceTaintRule %s: %w", r.Name, err)
	}
	return true, nil
}

type ruleClient interface {
	Create(context.Context, *resourcev1.DeviceTaintRule, metav1.CreateOptions) (*resourcev1.DeviceTaintRule, error)
	Get(context.Context, string, metav1.GetOptions) (*resourcev1.DeviceTaintRule, error)
	Update(context.Context, *resourcev1.DeviceTaintRule, metav1.UpdateOptions) (*resourcev1.DeviceTaintRule, error)
}

func sameSelector(a, b *resourcev1.DeviceTaintSelector) bool {
	eq := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a != nil && b != nil && eq(a.Driver, b.Driver) && eq(a.Pool, b.Pool) && eq(a.Device, b.Device)
}

// Undrained is what an undrain did.
type Undrained struct {
	// Rules are the DeviceTaintRules deleted.
	Rules []string
	// NodeRules are the node-wide drain rules that still drain an
	// undrained GPU (undrain the node to lift them).
	NodeRules []string
}

// Undrain deletes the drain rules of the target: a node's, all of them
// (node-wide and per GPU); a GPU's, that GPU's. It fails when there were
// none, saying what is drained on the node.
func Undrain(ctx context.Context, cs kubernetes.Interface, t Target) (*Undrained, error) {
	gpuUUID := ""
	if t.GPU != "" {
		gpus, err := nodeGPUs(ctx, cs, t.Node)
		if err != nil {
			return nil, err
		}
		g, err := pick(gpus, t)
		if err != nil {
			return nil, err
		}
		gpuUUID = g.UUID
	}
	rules, err := owned(ctx, cs, t.Node, gpuUUID)
	if err != nil {
		return nil, err
	}
	if len(rules) == 0 {
		all, err := owned(ctx, cs, t.Node, "")
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			return nil, fmt.Errorf("%s is not drained: no DeviceTaintRule of gpuslice drains node %s", t, t.Node)
		}
		return nil, fmt.Errorf("%s is not drained on its own: node %s is drained as a whole; undrain %s", t, t.Node, t.Node)
	}
	out := &Undrained{}
	for _, r := range rules {
		if err := cs.ResourceV1().DeviceTaintRules().Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return out, fmt.Errorf("undrain %s: delete DeviceTaintRule %s: %w", t, r.Name, err)
		}
		out.Rules = append(out.Rules, r.Name)
	}
	if t.GPU != "" {
		all, err := owned(ctx, cs, t.Node, "")
		if err != nil {
			return out, err
		}
		for _, r := range all {
			if r.Annotations[AnnotationGPU] == "" {
				out.NodeRules = append(out.NodeRules, r.Name)
			}
		}
	}
	return out, nil
}

// owned lists drain's rules of node (and of one GPU, by UUID), by name.
func owned(ctx context.Context, cs kubernetes.Interface, node, gpuUUID string) ([]*resourcev1.DeviceTaintRule, error) {
	list, err := cs.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{LabelDrain: "true"}.String()})
	if err != nil {
		return nil, fmt.Errorf("list the DeviceTaintRules of gpuslice's drains: %w", err)
	}
	var out []*resourcev1.DeviceTaintRule
	for i := range list.Items {
		if targets(&list.Items[i], node, gpuUUID) {
			out = append(out, &list.Items[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func noGPUs(node string) error {
	return fmt.Errorf("node %s publishes no GPUs: no ResourceSlice of driver %s names it; check the node's name (kubectl get nodes) and that its gpuslice node plugin runs (kubectl get resourceslices --field-selector spec.nodeName=%s)", node, contract.DriverName, node)
}
