package capacity

import (
	"context"
	"fmt"
	"sort"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// left is what each GPU's counters have left after what is allocated on
// it: each partition's consumption, and a shared device's in full once
// while any share of it lives.
func (s *Snapshot) left() map[string]map[string]resource.Quantity {
	left := map[string]map[string]resource.Quantity{}
	for key, total := range s.counters {
		l := map[string]resource.Quantity{}
		for n, q := range total {
			l[n] = q.DeepCopy()
		}
		left[key] = l
	}
	for _, d := range s.devices {
		if d.allocated && d.gpu != "" {
			for n, q := range d.consumes {
				v := left[d.gpu][n]
				v.Sub(q)
				left[d.gpu][n] = v
			}
		}
	}
	return left
}

// fits is how many times the counters left hold what d consumes, at most
// n (no counters: n).
func fits(d *device, left map[string]map[string]resource.Quantity, n int64) int64 {
	if d.gpu == "" {
		return n
	}
	for name, q := range d.consumes {
		if q.IsZero() {
			continue
		}
		l := left[d.gpu][name]
		if fit := l.Value() / q.Value(); fit < n {
			n = max(fit, 0)
		}
	}
	return n
}

// Package counts the slices of a package (of a fraction or a MIG profile:
// the devices its class selects; any-size or time-sliced: the slices its
// GPUs' shared devices can give).
func (s *Snapshot) Package(pkg *spec.Package) Package {
	p := Package{Name: pkg.Name, GPUModel: pkg.GPUModel, Fraction: pkg.Fraction, Sharing: pkg.Kind(), Isolation: pkg.Isolation(), MIGProfile: pkg.MIGProfile}
	nodes := nodeTally{}
	left := s.left()
	switch p.Sharing {
	case contract.SharingMIG:
		s.countMIG(pkg, left, nodes)
	case contract.SharingPartition:
		s.countPartitions(pkg, left, nodes)
	default:
		s.countShares(pkg, p.Sharing, left, nodes)
	}
	for _, nc := range nodes {
		p.Nodes = append(p.Nodes, *nc)
		p.Published += nc.Published
		p.Allocated += nc.Allocated
		p.Free += nc.Free
	}
	sort.Slice(p.Nodes, func(i, j int) bool { return p.Nodes[i].Node < p.Nodes[j].Node })
	return p
}

// nodeTally is a package's counts per node, as they are being counted.
type nodeTally map[string]*NodeCounts

// of is the counts of the node named name, started at zero.
func (t nodeTally) of(name string) *NodeCounts {
	nc := t[name]
	if nc == nil {
		nc = &NodeCounts{Node: name}
		t[name] = nc
	}
	return nc
}

// countMIG counts a MIG package: one instance is one slice; an instance
// consumes no counters (its GPU is in MIG mode and offers nothing else).
func (s *Snapshot) countMIG(pkg *spec.Package, left map[string]map[string]resource.Quantity, nodes nodeTally) {
	for _, d := range s.devices {
		if d.model != pkg.GPUModel || d.sharing != contract.SharingMIG || d.migProfile != pkg.MIGProfile {
			continue
		}
		nc := nodes.of(d.node)
		nc.Published++
		if d.allocated {
			nc.Allocated++
		} else if !d.tainted {
			nc.Free += fits(d, left, 1)
		}
	}
}

// countPartitions counts a partition package: its devices, of which a
// GPU's unallocated ones are free as far as the GPU's counters still hold
// them.
func (s *Snapshot) countPartitions(pkg *spec.Package, left map[string]map[string]resource.Quantity, nodes nodeTally) {
	unallocated := map[string]int64{} // per GPU, of this package
	perGPU := map[string]*device{}
	for _, d := range s.devices {
		if d.model != pkg.GPUModel || d.sharing != contract.SharingPartition || d.fraction != int64(pkg.Fraction) {
			continue
		}
		nc := nodes.of(d.node)
		nc.Published++
		if d.allocated {
			nc.Allocated++
			continue
		}
		if d.tainted {
			continue
		}
		unallocated[d.gpu]++
		perGPU[d.gpu] = d
	}
	for gpu, n := range unallocated {
		d := perGPU[gpu]
		nodes[d.node].Free += fits(d, left, n)
	}
}

// countShares counts an any-size or time-sliced package (sharing): the
// slices of its size each shared device of its kind can give, and the
// shares of its class.
func (s *Snapshot) countShares(pkg *spec.Package, sharing string, left map[string]map[string]resource.Quantity, nodes nodeTally) {
	want := map[string]int64{}
	for name, q := range render.CapacityRequests(pkg) {
		want[string(name)] = q.Value()
	}
	for _, d := range s.devices {
		if d.model != pkg.GPUModel || d.sharing != sharing || len(want) == 0 {
			continue
		}
		nc := nodes.of(d.node)
		used := map[string]int64{}
		for _, sh := range d.shares {
			for name, v := range sh.consumed {
				used[name] += v
			}
			if sh.class == pkg.Name {
				nc.Allocated++
			}
		}
		nc.Published += slicesIn(d.capacity, map[string]int64{}, want)
		free := slicesIn(d.capacity, used, want)
		if d.tainted || len(d.shares) == 0 && fits(d, left, 1) == 0 {
			// tainted: no new share; else its first share charges the
			// GPU's counters in full, which a partition or another
			// kind's share holds
			free = 0
		}
		nc.Free += free
	}
}

// slicesIn is how many slices of want fit what is left of capacity after
// used.
func slicesIn(capacity, used, want map[string]int64) int64 {
	n := int64(-1)
	for name, w := range want {
		if w <= 0 {
			continue
		}
		k := max((capacity[name]-used[name])/w, 0)
		if n < 0 || k < n {
			n = k
		}
	}
	return max(n, 0)
}

// Packages counts the slices of every package applied to the cluster
// (gpuslice DeviceClasses), by name.
func (s *Snapshot) Packages(ctx context.Context, v *view.View) ([]Package, error) {
	objs, err := v.List(ctx, view.ManagedKind("resource.k8s.io", "DeviceClass"))
	if err != nil {
		return nil, fmt.Errorf("list the packages' DeviceClasses: %w", err)
	}
	classes, err := view.AllAs[resourcev1.DeviceClass](objs)
	if err != nil {
		return nil, err
	}
	var out []Package
	for _, dc := range classes {
		if dc.Labels[contract.LabelPackage] == "" {
			continue
		}
		if p, err := render.PackageOf(dc); err == nil {
			out = append(out, s.Package(p))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
