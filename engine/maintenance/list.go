package maintenance

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/contract"
)

// GPUState is a GPU with what keeps slices off it and what runs on it.
type GPUState struct {
	Node  string `json:"node"`
	Index int64  `json:"index"`
	UUID  string `json:"uuid"`
	Model string `json:"model"`
	// Taints are every taint on any of its devices, from DeviceTaintRules
	// (a drain's, or anyone's) and from the node plugin's ResourceSlices,
	// once each.
	Taints []Taint `json:"taints"`
	// Drained is the strongest effect of gpuslice's drain rules on it:
	// "", NoSchedule or NoExecute.
	Drained resourcev1.DeviceTaintEffect `json:"drained"`
	// Claims are the ResourceClaims allocated a device of it, as
	// namespace/name: the slices still on it.
	Claims []string `json:"claims"`
	// Health is the node plugin's verdict, from its health taint
	// (contract.TaintUnhealthy): "healthy", or "unhealthy: <reason>
	// (<effect>)".
	Health string `json:"health"`
	// HealthReason is, while the node plugin taints it unhealthy, the
	// taint's value alone (xid-<n>, ecc-double-bit, gpu-lost, …); empty
	// while it is healthy.
	HealthReason string `json:"health_reason,omitempty"`
	// Devices is how many devices it publishes; Tainted how many of them
	// carry a NoSchedule or NoExecute taint.
	Devices int `json:"devices"`
	Tainted int `json:"tainted"`
}

// Taint is one taint on some of a GPU's devices and where it comes from:
// the DeviceTaintRules that set it, and whether the node plugin publishes
// it in its ResourceSlices.
type Taint struct {
	Key       string                       `json:"key"`
	Value     string                       `json:"value"`
	Effect    resourcev1.DeviceTaintEffect `json:"effect"`
	Rules     []string                     `json:"rules"`
	FromSlice bool                         `json:"from_resource_slice"`
}

func (t Taint) String() string {
	var from []string
	if t.FromSlice {
		from = append(from, "node plugin")
	}
	switch len(t.Rules) {
	case 0:
	case 1:
		from = append(from, "DeviceTaintRule "+t.Rules[0])
	default:
		from = append(from, fmt.Sprintf("%d DeviceTaintRules", len(t.Rules)))
	}
	return fmt.Sprintf("%s=%s:%s (%s)", t.Key, t.Value, t.Effect, strings.Join(from, ", "))
}

// List reads every GPU the gpuslice node plugins publish with its taints,
// its drain and the claims allocated on it.
func List(ctx context.Context, cs kubernetes.Interface) ([]GPUState, error) {
	published, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: resourcev1.ResourceSliceSelectorDriver + "=" + contract.DriverName})
	if err != nil {
		return nil, fmt.Errorf("list the ResourceSlices of %s: %w", contract.DriverName, err)
	}
	rules, err := cs.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list DeviceTaintRules: %w", err)
	}
	claims, err := cs.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	holders := holdersOf(claims.Items)
	var out []GPUState
	for _, g := range groupGPUs(published.Items) {
		st := GPUState{Node: g.Node, Index: g.Index, UUID: g.UUID, Model: g.Model, Devices: len(g.Devices)}
		seen := map[taintKey]*Taint{}
		onGPU := sets.New[string]()
		for _, d := range g.Devices {
			blocking := false
			add := func(t resourcev1.DeviceTaint, rule string) {
				blocking = blocking || t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute
				k := taintKey{t.Key, t.Value, t.Effect}
				if seen[k] == nil {
					seen[k] = &Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
				}
				if rule == "" {
					seen[k].FromSlice = true
				} else if !slices.Contains(seen[k].Rules, rule) {
					seen[k].Rules = append(seen[k].Rules, rule)
				}
			}
			for _, t := range d.Taints {
				add(t, "")
			}
			for i := range rules.Items {
				r := &rules.Items[i]
				if !selects(r, d.Pool, d.Name) {
					continue
				}
				add(r.Spec.Taint, r.Name)
				if r.Labels[LabelDrain] == "true" && stronger(r.Spec.Taint.Effect, st.Drained) {
					st.Drained = r.Spec.Taint.Effect
				}
			}
			if blocking {
				st.Tainted++
			}
			onGPU = onGPU.Union(holders[d.Pool+"/"+d.Name])
		}
		for _, t := range seen {
			sort.Strings(t.Rules)
			st.Taints = append(st.Taints, *t)
			if t.Key == contract.TaintUnhealthy && t.FromSlice {
				st.HealthReason = t.Value
			}
		}
		st.Claims = sets.List(onGPU)
		sort.Slice(st.Taints, func(i, j int) bool { return st.Taints[i].String() < st.Taints[j].String() })
		st.Health = healthOf(st.Taints)
		out = append(out, st)
	}
	return out, nil
}

// holdersOf maps each allocated gpuslice device, as pool/device, to the
// claims (namespace/name) it is allocated to.
func holdersOf(claims []resourcev1.ResourceClaim) map[string]sets.Set[string] {
	holders := map[string]sets.Set[string]{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != contract.DriverName {
				continue
			}
			k := r.Pool + "/" + r.Device
			if holders[k] == nil {
				holders[k] = sets.New[string]()
			}
			holders[k].Insert(c.Namespace + "/" + c.Name)
		}
	}
	return holders
}

// Unhealthy reports whether the node plugin taints the GPU unhealthy.
func (g GPUState) Unhealthy() bool { return g.HealthReason != "" }

type taintKey struct {
	key, value string
	effect     resourcev1.DeviceTaintEffect
}

// stronger reports whether effect a keeps more off a device than b.
func stronger(a, b resourcev1.DeviceTaintEffect) bool {
	rank := map[resourcev1.DeviceTaintEffect]int{resourcev1.DeviceTaintEffectNoSchedule: 1, resourcev1.DeviceTaintEffectNoExecute: 2}
	return rank[a] > rank[b]
}
