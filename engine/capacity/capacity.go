// Package capacity says what the cluster's GPUs offer, from what the node
// plugins publish (ResourceSlices) and what the scheduler allocated
// (ResourceClaims): per package the slices published, allocated and still
// free, per node too; and every GPU with its node, model, compute
// capability, memory and driver. The provider's gpuslice_capacity and
// gpuslice_gpus data sources read it.
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
)

// Counts are slices of one package.
type Counts struct {
	Published int64 `json:"published"`
	Allocated int64 `json:"allocated"`
	// Free is what the scheduler could still allocate: slices on one GPU
	// share its memory and compute, so a GPU with a whole-GPU slice taken
	// has no free quarter left, however many are published.
	Free int64 `json:"free"`
}

// Package is one package's slices across the cluster and per node.
type Package struct {
	Name     string `json:"name"`
	GPUModel string `json:"gpu_model"`
	Fraction int    `json:"fraction"`
	Counts
	Nodes []NodeCounts `json:"nodes"`
}

// NodeCounts are a package's slices on one node.
type NodeCounts struct {
	Node string `json:"node"`
	Counts
}

// GPU is one physical GPU as its node plugin publishes it.
type GPU struct {
	Node              string `json:"node"`
	Model             string `json:"model"`
	UUID              string `json:"uuid"`
	Index             int64  `json:"index"`
	ComputeCapability string `json:"compute_capability"`
	Architecture      string `json:"architecture"`
	DriverVersion     string `json:"driver_version"`
	MemoryBytes       int64  `json:"memory_bytes"`
}

// device is one published slice.
type device struct {
	pool, name, node string
	model            string
	fraction         int64
	gpu              string // the counter set it consumes: one per GPU
	consumes         map[string]resource.Quantity
	allocated        bool
}

// Snapshot is the published and allocated devices, read once.
type Snapshot struct {
	devices []*device
	// counters per GPU (pool + counter set): what the GPU has in all.
	counters map[string]map[string]resource.Quantity
	gpus     []GPU
}

// Load reads the driver's ResourceSlices and every ResourceClaim's
// allocation from the engine's view.
func Load(ctx context.Context, v *view.View) (*Snapshot, error) {
	v.Warm(view.ResourceSlices, view.ResourceClaims)
	objs, err := v.List(ctx, view.ResourceSlices)
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices of %s: %w", contract.DriverName, err)
	}
	slices := view.Typed[resourcev1.ResourceSlice](objs)
	// Published order is not the cache's: keep GPUs and devices stable.
	sort.Slice(slices, func(i, j int) bool { return slices[i].Name < slices[j].Name })
	s := &Snapshot{counters: map[string]map[string]resource.Quantity{}}
	byKey := map[string]*device{}
	gpus := map[string]*GPU{}
	for _, sl := range slices {
		if sl.Spec.Driver != contract.DriverName {
			continue // the selector does it on a cluster; not every fake client does
		}
		node := ""
		if sl.Spec.NodeName != nil {
			node = *sl.Spec.NodeName
		}
		pool := sl.Spec.Pool.Name
		for _, cs := range sl.Spec.SharedCounters {
			total := map[string]resource.Quantity{}
			for name, c := range cs.Counters {
				total[name] = c.Value
			}
			s.counters[pool+"/"+cs.Name] = total
		}
		for _, d := range sl.Spec.Devices {
			dev := &device{pool: pool, name: d.Name, node: node, model: str(d.Attributes[contract.AttrModel]), fraction: num(d.Attributes[contract.AttrFraction])}
			if len(d.ConsumesCounters) > 0 {
				dev.gpu = pool + "/" + d.ConsumesCounters[0].CounterSet
				dev.consumes = map[string]resource.Quantity{}
				for name, c := range d.ConsumesCounters[0].Counters {
					dev.consumes[name] = c.Value
				}
			}
			s.devices = append(s.devices, dev)
			byKey[pool+"/"+d.Name] = dev
			s.addGPU(gpus, node, dev.gpu, d)
		}
	}
	claims, err := v.List(ctx, view.ResourceClaims)
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	for _, claim := range view.Typed[resourcev1.ResourceClaim](claims) {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if d, ok := byKey[r.Pool+"/"+r.Device]; ok && r.Driver == contract.DriverName {
				d.allocated = true
			}
		}
	}
	for _, g := range gpus {
		s.gpus = append(s.gpus, *g)
	}
	sort.Slice(s.gpus, func(i, j int) bool {
		if s.gpus[i].Node != s.gpus[j].Node {
			return s.gpus[i].Node < s.gpus[j].Node
		}
		return s.gpus[i].Index < s.gpus[j].Index
	})
	return s, nil
}

// addGPU records the GPU a device is a slice of; the whole-GPU device (or
// the largest seen) gives its memory.
func (s *Snapshot) addGPU(gpus map[string]*GPU, node, key string, d resourcev1.Device) {
	if key == "" {
		key = node + "/" + d.Name
	}
	g, ok := gpus[key]
	if !ok {
		g = &GPU{Node: node, Model: str(d.Attributes[contract.AttrModel]), UUID: str(d.Attributes[contract.AttrUUID]),
			Index: num(d.Attributes[contract.AttrIndex]), ComputeCapability: version(d.Attributes[contract.AttrComputeCapability]),
			Architecture: str(d.Attributes[contract.AttrArchitecture]), DriverVersion: str(d.Attributes[contract.AttrDriverVersion])}
		gpus[key] = g
	}
	if total, ok := s.counters[key][contract.CapacityMemory]; ok {
		g.MemoryBytes = total.Value()
	} else if m, ok := d.Capacity[contract.CapacityMemory]; ok && m.Value.Value() > g.MemoryBytes {
		g.MemoryBytes = m.Value.Value()
	}
}

// GPUs lists the GPUs, by node and index.
func (s *Snapshot) GPUs() []GPU { return s.gpus }

// Package counts the slices a package (GPU model and fraction) selects.
func (s *Snapshot) Package(name, model string, fraction int) Package {
	p := Package{Name: name, GPUModel: model, Fraction: fraction}
	nodes := map[string]*NodeCounts{}
	// What each GPU has left after its allocated slices.
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
	unallocated := map[string]int64{} // per GPU, of this package
	perGPU := map[string]*device{}
	for _, d := range s.devices {
		if d.model != model || d.fraction != int64(fraction) {
			continue
		}
		nc := nodes[d.node]
		if nc == nil {
			nc = &NodeCounts{Node: d.node}
			nodes[d.node] = nc
		}
		nc.Published++
		if d.allocated {
			nc.Allocated++
			continue
		}
		unallocated[d.gpu]++
		perGPU[d.gpu] = d
	}
	for gpu, n := range unallocated {
		d := perGPU[gpu]
		free := n
		if gpu != "" {
			for name, q := range d.consumes {
				if q.IsZero() {
					continue
				}
				l := left[gpu][name]
				if fit := l.Value() / q.Value(); fit < free {
					free = max(fit, 0)
				}
			}
		}
		nodes[d.node].Free += free
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
			out = append(out, s.Package(p.Name, p.GPUModel, p.Fraction))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func str(a resourcev1.DeviceAttribute) string {
	if a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func num(a resourcev1.DeviceAttribute) int64 {
	if a.IntValue != nil {
		return *a.IntValue
	}
	return 0
}

func version(a resourcev1.DeviceAttribute) string {
	if a.VersionValue != nil {
		return *a.VersionValue
	}
	return str(a)
}
