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
)

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
	// tainted: a NoSchedule or NoExecute taint (the node plugin's, or a
	// DeviceTaintRule's, e.g. a drain) keeps new allocations off it; the
	// packages' classes tolerate none.
	tainted  bool
	multiple bool // allowMultipleAllocations as the API server kept it
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
	v.Warm(view.ResourceSlices, view.ResourceClaims, view.DeviceTaintRules)
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
			for _, t := range d.Taints {
				dev.tainted = dev.tainted || blocks(t.Effect)
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
	if err := s.readTaintRules(ctx, v); err != nil {
		return err
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

// readTaintRules marks the devices a DeviceTaintRule taints so that no
// new slice lands on them: by driver, pool and device, the only selectors
// a rule has.
func (s *Snapshot) readTaintRules(ctx context.Context, v *view.View) error {
	objs, err := v.List(ctx, view.DeviceTaintRules)
	if err != nil {
		return fmt.Errorf("list DeviceTaintRules: %w", err)
	}
	for _, r := range view.Typed[resourcev1.DeviceTaintRule](objs) {
		sel := r.Spec.DeviceSelector
		if sel == nil || !blocks(r.Spec.Taint.Effect) || (sel.Driver != nil && *sel.Driver != contract.DriverName) {
			continue
		}
		for _, d := range s.devices {
			if (sel.Pool == nil || *sel.Pool == d.pool) && (sel.Device == nil || *sel.Device == d.name) {
				d.tainted = true
			}
		}
	}
	return nil
}

// blocks reports whether a taint's effect keeps new allocations off a
// device (None is informational; unknown effects count as None).
func blocks(e resourcev1.DeviceTaintEffect) bool {
	return e == resourcev1.DeviceTaintEffectNoSchedule || e == resourcev1.DeviceTaintEffectNoExecute
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
			Architecture: str(d.Attributes[contract.AttrArchitecture]), DriverVersion: str(d.Attributes[contract.AttrDriverVersion]),
			MemorySource: memorySource(d)}
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
