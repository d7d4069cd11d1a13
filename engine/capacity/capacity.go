// Package capacity says what the cluster's GPUs offer, from what the node
// plugins publish (ResourceSlices) and what the scheduler allocated
// (ResourceClaims): per package the slices published, allocated and still
// free, per node too; and every GPU with its node, model, compute
// capability, memory and driver. The provider's gpuslice_capacity and
// gpuslice_gpus data sources read it.
package capacity

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
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

// Package is one package's slices across the cluster and per node. For
// an any-size or time-sliced package, published is how many of its slices
// the GPUs could hold were they empty; for a MIG package, how many MIG
// instances of its profile the nodes publish.
type Package struct {
	Name     string `json:"name"`
	GPUModel string `json:"gpu_model"`
	Fraction int    `json:"fraction"`
	// Sharing is the package's kind: partition, any-size, time-sliced or
	// mig.
	Sharing string `json:"sharing"`
	// Isolation is what holds a slice to its share: software (the shim),
	// hardware (MIG) or none (time-sliced).
	Isolation string `json:"isolation"`
	// MIGProfile is a MIG package's profile, "" for the other kinds.
	MIGProfile string `json:"mig_profile"`
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
	// counterSet is the pool/name of the GPU's counter set, whose memory
	// is the GPU's (a MIG instance's own is not).
	counterSet string
}

// device is one published device: a partition or MIG instance, or a
// shared (any-size or time-sliced) device allocated once per share.
type device struct {
	pool, name, node string
	model            string
	fraction         int64
	sharing          string                       // contract.Sharing*; partition for older plugins' devices
	migProfile       string                       // of a MIG instance
	parentUUID       string                       // of a MIG instance: its GPU's UUID
	gpu              string                       // the counter set it consumes: one per GPU
	consumes         map[string]resource.Quantity // of the counters: once, at a shared device's first share
	capacity         map[string]int64             // what a shared device's shares divide
	allocated        bool
	multiple         bool // allowMultipleAllocations as the API server kept it
	// shares are a shared device's allocations: consumed capacity and the
	// class of the request that got it.
	shares []share
}

type share struct {
	class    string
	consumed map[string]int64
}

// Snapshot is the published and allocated devices, read once.
type Snapshot struct {
	devices []*device
	byKey   map[string]*device // by pool/device
	// counters per GPU (pool + counter set): what the GPU has in all.
	counters map[string]map[string]resource.Quantity
	gpus     []GPU
}

// Load reads the driver's ResourceSlices and every ResourceClaim's
// allocation from the engine's view.
func Load(ctx context.Context, v *view.View) (*Snapshot, error) {
	v.Warm(view.ResourceSlices, view.ResourceClaims)
	s, err := Published(ctx, v)
	if err != nil {
		return nil, err
	}
	return s, s.ReadAllocations(ctx, v)
}

// Published reads what the node plugins publish (the GPUs and their
// devices) without what is allocated: ResourceSlices only, which the
// driver's field selector picks. Package counts need ReadAllocations too.
func Published(ctx context.Context, v *view.View) (*Snapshot, error) {
	v.Warm(view.ResourceSlices)
	objs, err := v.List(ctx, view.ResourceSlices)
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices of %s: %w", contract.DriverName, err)
	}
	slices := view.Typed[resourcev1.ResourceSlice](objs)
	// Published order is not the cache's: keep GPUs and devices stable.
	sort.Slice(slices, func(i, j int) bool { return slices[i].Name < slices[j].Name })
	s := &Snapshot{counters: map[string]map[string]resource.Quantity{}, byKey: map[string]*device{}}
	byKey := s.byKey
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
			dev := &device{pool: pool, name: d.Name, node: node, model: str(d.Attributes[contract.AttrModel]), fraction: num(d.Attributes[contract.AttrFraction]),
				sharing: cmp.Or(str(d.Attributes[contract.AttrSharing]), contract.SharingPartition), capacity: map[string]int64{},
				multiple:   d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations,
				migProfile: str(d.Attributes[contract.AttrMIGProfile]), parentUUID: str(d.Attributes[contract.AttrParentUUID])}
			for name, c := range d.Capacity {
				dev.capacity[string(name)] = c.Value.Value()
			}
			if len(d.ConsumesCounters) > 0 {
				dev.gpu = pool + "/" + d.ConsumesCounters[0].CounterSet
				dev.consumes = map[string]resource.Quantity{}
				for name, c := range d.ConsumesCounters[0].Counters {
					dev.consumes[name] = c.Value
				}
			}
			s.devices = append(s.devices, dev)
			byKey[pool+"/"+d.Name] = dev
			s.addGPU(gpus, node, dev, d)
		}
	}
	for _, g := range gpus {
		// after every slice: a GPU's counter slice may come after its devices
		if total, ok := s.counters[g.counterSet][contract.CapacityMemory]; ok {
			g.MemoryBytes = total.Value()
		}
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

// ReadAllocations marks the devices the scheduler allocated, from every
// ResourceClaim in the cluster: a claim in any namespace may hold one, and
// a claim's allocation cannot be selected on, so this is the one read of
// the engine that grows with the cluster's claims. Only what counts free
// slices calls it.
func (s *Snapshot) ReadAllocations(ctx context.Context, v *view.View) error {
	if len(s.devices) == 0 {
		return nil // nothing published, nothing to be allocated
	}
	byKey := s.byKey
	claims, err := v.List(ctx, view.ResourceClaims)
	if err != nil {
		return fmt.Errorf("list ResourceClaims: %w", err)
	}
	for _, claim := range view.Typed[resourcev1.ResourceClaim](claims) {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			d, ok := byKey[r.Pool+"/"+r.Device]
			if !ok || r.Driver != contract.DriverName {
				continue
			}
			d.allocated = true
			if d.shared() {
				sh := share{class: requestClass(claim, r.Request), consumed: map[string]int64{}}
				for name, q := range r.ConsumedCapacity {
					sh.consumed[string(name)] = q.Value()
				}
				d.shares = append(d.shares, sh)
			}
		}
	}
	return nil
}

// shared reports whether the device is given to several claims at once.
func (d *device) shared() bool {
	return d.sharing == contract.SharingAnySize || d.sharing == contract.SharingTimeSliced
}

// addGPU records the GPU a device is a slice of; its counter set gives its
// memory, or, from plugins that publish none, the whole-GPU device (or the
// largest seen). A MIG instance is its parent's: the GPU's UUID is the
// parent's, and no instance's memory is the GPU's.
func (s *Snapshot) addGPU(gpus map[string]*GPU, node string, dev *device, d resourcev1.Device) {
	key, uuid := dev.gpu, str(d.Attributes[contract.AttrUUID])
	mig := dev.sharing == contract.SharingMIG
	switch {
	case mig:
		key, uuid = node+"/"+dev.parentUUID, dev.parentUUID
	case key == "":
		key = node + "/" + d.Name
	}
	g, ok := gpus[key]
	if !ok {
		g = &GPU{Node: node, Model: str(d.Attributes[contract.AttrModel]), UUID: uuid,
			Index: num(d.Attributes[contract.AttrIndex]), ComputeCapability: version(d.Attributes[contract.AttrComputeCapability]),
			Architecture: str(d.Attributes[contract.AttrArchitecture]), DriverVersion: str(d.Attributes[contract.AttrDriverVersion])}
		gpus[key] = g
	}
	if dev.gpu != "" {
		g.counterSet = dev.gpu
	}
	if mig {
		return
	}
	if m, ok := d.Capacity[contract.CapacityMemory]; ok && m.Value.Value() > g.MemoryBytes {
		g.MemoryBytes = m.Value.Value()
	}
}

// Device is one published device, as the plan-time checks see it.
type Device struct {
	Node, Name, Model string
	// Sharing is contract.Sharing*; a partition for devices of plugins
	// older than sharing.
	Sharing string
	// MIGProfile is a MIG instance's profile.
	MIGProfile string
	// MultipleAllocations is allowMultipleAllocations as the API server
	// kept it: a shared device without it was stripped of it (the
	// DRAConsumableCapacity feature is off).
	MultipleAllocations bool
}

// Devices lists every published device.
func (s *Snapshot) Devices() []Device {
	out := make([]Device, 0, len(s.devices))
	for _, d := range s.devices {
		out = append(out, Device{Node: d.node, Name: d.name, Model: d.model, Sharing: d.sharing, MIGProfile: d.migProfile, MultipleAllocations: d.multiple})
	}
	return out
}

// GPUs lists the GPUs, by node and index.
func (s *Snapshot) GPUs() []GPU { return s.gpus }

// requestClass is the device class of a claim's request (a request name,
// or <request>/<subrequest>).
func requestClass(claim *resourcev1.ResourceClaim, request string) string {
	name, _, _ := strings.Cut(request, "/")
	for _, r := range claim.Spec.Devices.Requests {
		if r.Name == name && r.Exactly != nil {
			return r.Exactly.DeviceClassName
		}
	}
	return ""
}

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
	nodes := map[string]*NodeCounts{}
	node := func(name string) *NodeCounts {
		nc := nodes[name]
		if nc == nil {
			nc = &NodeCounts{Node: name}
			nodes[name] = nc
		}
		return nc
	}
	left := s.left()
	switch p.Sharing {
	case contract.SharingMIG:
		// one instance is one slice; an instance consumes no counters
		// (its GPU is in MIG mode and offers nothing else)
		for _, d := range s.devices {
			if d.model != pkg.GPUModel || d.sharing != contract.SharingMIG || d.migProfile != pkg.MIGProfile {
				continue
			}
			nc := node(d.node)
			nc.Published++
			if d.allocated {
				nc.Allocated++
			} else {
				nc.Free += fits(d, left, 1)
			}
		}
	case contract.SharingPartition:
		unallocated := map[string]int64{} // per GPU, of this package
		perGPU := map[string]*device{}
		for _, d := range s.devices {
			if d.model != pkg.GPUModel || d.sharing != contract.SharingPartition || d.fraction != int64(pkg.Fraction) {
				continue
			}
			nc := node(d.node)
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
			nodes[d.node].Free += fits(d, left, n)
		}
	default:
		want := map[string]int64{}
		for name, q := range render.CapacityRequests(pkg) {
			want[string(name)] = q.Value()
		}
		for _, d := range s.devices {
			if d.model != pkg.GPUModel || d.sharing != p.Sharing || len(want) == 0 {
				continue
			}
			nc := node(d.node)
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
			if len(d.shares) == 0 && fits(d, left, 1) == 0 {
				// its first share charges the GPU's counters in full,
				// which a partition or another kind's share holds
				free = 0
			}
			nc.Free += free
		}
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
