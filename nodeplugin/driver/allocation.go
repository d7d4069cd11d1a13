package driver

import (
	"context"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
)

// A claim holds one slice, or several whole GPUs (a multi-GPU pod: one
// request with count N of a whole-GPU package's class). A slice is a
// partition, or a share of a GPU's any-size device (the memory and compute
// the scheduler gave it: its consumed capacity) or of its time-sliced
// device (no limits). The shim keeps one accounting region per claim, with
// one memory budget and one compute share, so a claim of whole GPUs gets
// the sum of its GPUs' memory as its budget and a share of 100 (no
// pacing): each GPU's own memory bounds what the claim can use there, and
// the budget never stops the pod from filling every GPU. Several partial
// GPUs cannot be described by one budget and one share (a 50 % share
// would pace both GPUs' kernels against one clock), so such a claim is
// refused.

// checkpointEntry checks a claim's allocation (gpuslice devices this node
// offers, each request's exactly one slice of its package: one slice, or
// whole GPUs each on its own GPU) and returns the claim's checkpoint entry.
func (p *Plugin) checkpointEntry(ctx context.Context, claim *resourceapi.ResourceClaim) (checkpoint.Claim, error) {
	var ours []resourceapi.DeviceRequestAllocationResult
	if claim.Status.Allocation != nil {
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver == contract.DriverName {
				ours = append(ours, r)
			}
		}
	}
	ref := claim.Namespace + "/" + claim.Name
	if len(ours) == 0 {
		return checkpoint.Claim{}, fmt.Errorf("claim %s has no gpuslice device allocated: the kubelet asked gpuslice to prepare a claim the scheduler gave no %s device; delete the pod so the claim is allocated again", ref, contract.DriverName)
	}
	entry := checkpoint.Claim{Namespace: claim.Namespace, Name: claim.Name, PodUIDs: podUIDs(claim)}
	for _, r := range ours {
		dev, ok := p.devices[r.Device]
		if r.Pool != p.cfg.NodeName || !ok {
			return checkpoint.Claim{}, fmt.Errorf("claim %s is allocated device %s/%s, which this node (%s) does not offer: was the node's GPU set, --fractions, --any-size or --time-slicing changed? Delete the pod so the claim is allocated again", ref, r.Pool, r.Device, p.cfg.NodeName)
		}
		d, err := allocatedDevice(ref, r, dev)
		if err != nil {
			return checkpoint.Claim{}, err
		}
		entry.Devices = append(entry.Devices, d)
	}
	if err := p.checkPackages(ctx, claim, entry.Devices); err != nil {
		return checkpoint.Claim{}, err
	}
	if err := checkShape(ref, entry.Devices); err != nil {
		return checkpoint.Claim{}, err
	}
	return entry, nil
}

// allocatedDevice is the checkpoint's record of one allocated device: a
// partition's size, or what an any-size or time-sliced share was given.
func allocatedDevice(ref string, r resourceapi.DeviceRequestAllocationResult, dev publish.Device) (checkpoint.Device, error) {
	d := checkpoint.Device{Request: r.Request, Pool: r.Pool, Name: r.Device, GPUUUID: dev.GPU.UUID, GPUIndex: dev.GPU.Index, GPUMinor: dev.GPU.Minor}
	if m := dev.MIG; m != nil {
		d.Sharing, d.MemoryBytes = contract.SharingMIG, dev.MemoryBytes
		d.MIG = &checkpoint.MIGInstance{UUID: m.UUID, Profile: m.Profile, Placement: m.Placement, GPUInstance: m.GPUInstance, ComputeInstance: m.ComputeInstance}
		return d, nil
	}
	if !dev.Shared() {
		d.Fraction, d.MemoryBytes = dev.Fraction, dev.MemoryBytes
		return d, nil
	}
	d.Sharing = dev.Sharing
	if r.ShareID == nil {
		return d, fmt.Errorf("claim %s is allocated %s device %s without a share ID: the scheduler allocated it as a whole, which needs the "+
			"DRAConsumableCapacity feature gate on in the API server and the scheduler; turn it on, or publish partitions only (--any-size=false --time-slicing=false), "+
			"and delete the pod so the claim is allocated again", ref, dev.Sharing, dev.Name)
	}
	d.ShareID = string(*r.ShareID)
	consumed := func(name string) (int64, error) {
		q, ok := r.ConsumedCapacity[resourceapi.QualifiedName(name)]
		if !ok || q.Sign() <= 0 {
			return 0, fmt.Errorf("claim %s is allocated a share of %s without a consumed %s: the scheduler did not account it (is DRAConsumableCapacity on in the scheduler?); delete the pod so the claim is allocated again", ref, dev.Name, name)
		}
		return q.Value(), nil
	}
	switch dev.Sharing {
	case contract.SharingAnySize:
		memory, err := consumed(contract.CapacityMemory)
		if err != nil {
			return d, err
		}
		compute, err := consumed(contract.CapacityCompute)
		if err != nil {
			return d, err
		}
		if uint64(memory) > dev.MemoryBytes || compute > contract.ComputeWhole {
			return d, fmt.Errorf("claim %s was given %d bytes and %d%% compute of %s, more than its GPU has (%d bytes, 100%%); delete the pod so the claim is allocated again", ref, memory, compute, dev.Name, dev.MemoryBytes)
		}
		d.MemoryBytes, d.Fraction = uint64(memory), int(compute)
	case contract.SharingTimeSliced:
		shares, err := consumed(contract.CapacityShares)
		if err != nil {
			return d, err
		}
		d.Shares = shares
	}
	return d, nil
}

// checkShape refuses what the engine never renders but a hand-written
// claim might ask for: two devices on one GPU, or several devices that are
// not all whole GPUs.
func checkShape(ref string, devs []checkpoint.Device) error {
	if len(devs) == 1 {
		return nil
	}
	onGPU := map[string]string{}
	for _, d := range devs {
		if other, ok := onGPU[d.GPUUUID]; ok {
			return fmt.Errorf("claim %s is allocated devices %s and %s, both on GPU %s: the devices of a claim must each be a different GPU; "+
				"request whole GPUs (the %d%% class, one device per GPU) and delete the pod so the claim is allocated again", ref, other, d.Name, d.GPUUUID, contract.ComputeWhole)
		}
		onGPU[d.GPUUUID] = d.Name
	}
	for _, d := range devs {
		what := fmt.Sprintf("a %d%% slice", d.Fraction)
		if d.MIG != nil {
			what = "a MIG instance"
		} else if !d.Partition() {
			what = "a share of an " + d.Sharing + " device"
		} else if d.Fraction == contract.ComputeWhole {
			continue
		}
		return fmt.Errorf("claim %s is allocated %d gpuslice devices and %s is %s: a claim may hold several devices only when each is a whole GPU "+
			"(the shim keeps one memory budget and one compute share per claim, which cannot describe several partial GPUs); "+
			"ask for one slice per claim, or for N devices of a whole-GPU (%d%%) package's device class", ref, len(devs), d.Name, what, contract.ComputeWhole)
	}
	return nil
}

func podUIDs(claim *resourceapi.ResourceClaim) []string {
	var out []string
	for _, r := range claim.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			out = append(out, string(r.UID))
		}
	}
	slices.Sort(out)
	return out
}

// gpuUse is what the prepared claims hold of one GPU.
type gpuUse struct {
	memory     uint64
	compute    int
	shares     int64
	timeSliced string // a time-sliced claim on the GPU, for messages
	isolated   string // a partition or any-size claim on the GPU
}

func (u *gpuUse) add(ref string, d checkpoint.Device) {
	if d.Sharing == contract.SharingTimeSliced {
		u.shares += d.Shares
		u.timeSliced = ref
		return
	}
	u.memory += d.MemoryBytes
	u.compute += d.Fraction
	u.isolated = ref
}

// conflicts is the last line of defence behind the scheduler: a partition
// is never prepared for two claims, a GPU's claims never add up to more
// than its memory, compute or time-sliced shares, and a GPU is never both
// time-sliced and isolated (a time-sliced claim may use the whole GPU, so
// an isolated claim beside it would not get what it was given). gpuMemory
// gives each GPU's memory by UUID.
func conflicts(cp *checkpoint.Checkpoint, uid string, entry checkpoint.Claim, gpuMemory func(uuid string) uint64) error {
	ref := entry.Namespace + "/" + entry.Name
	for _, d := range entry.Devices {
		var use gpuUse
		for other, c := range cp.Claims {
			if other == uid {
				continue
			}
			for _, od := range c.Devices {
				if od.Name == d.Name && (d.Partition() || od.ShareID == d.ShareID) {
					return fmt.Errorf("device %s is already prepared for claim %s/%s (uid %s); refusing to share it with %s", d.Name, c.Namespace, c.Name, other, ref)
				}
				if od.GPUUUID == d.GPUUUID {
					use.add(c.Namespace+"/"+c.Name, od)
				}
			}
		}
		switch {
		case d.Sharing == contract.SharingTimeSliced && use.isolated != "":
			return fmt.Errorf("claim %s would time-slice GPU %s, where claim %s holds an isolated slice; refusing to share it without limits", ref, d.GPUUUID, use.isolated)
		case d.Sharing != contract.SharingTimeSliced && use.timeSliced != "":
			return fmt.Errorf("claim %s would get an isolated slice of GPU %s, which claim %s time-slices without limits; refusing", ref, d.GPUUUID, use.timeSliced)
		}
		use.add(ref, d)
		if use.compute > contract.ComputeWhole {
			return fmt.Errorf("claim %s would bring GPU %s to %d%% of its compute allocated; refusing to oversubscribe it", ref, d.GPUUUID, use.compute)
		}
		if total := gpuMemory(d.GPUUUID); use.memory > total {
			return fmt.Errorf("claim %s would bring GPU %s to %d bytes of memory allocated, more than its %d; refusing to oversubscribe it", ref, d.GPUUUID, use.memory, total)
		}
		if use.shares > contract.TimeSliceShares {
			return fmt.Errorf("claim %s would bring GPU %s to %d of its %d time-sliced shares; refusing to oversubscribe it", ref, d.GPUUUID, use.shares, contract.TimeSliceShares)
		}
	}
	return nil
}

// result lists every device of the claim, each with the claim's one CDI
// device: the kubelet gives a container the devices of the requests it
// names, and the container runtime injects a repeated CDI device once. A
// share carries its share ID, which the kubelet matches with the
// allocation.
func (p *Plugin) result(uid string, c checkpoint.Claim) kubeletplugin.PrepareResult {
	var out kubeletplugin.PrepareResult
	for _, d := range c.Devices {
		dev := kubeletplugin.Device{
			Requests: []string{d.Request}, PoolName: d.Pool, DeviceName: d.Name, CDIDeviceIDs: []string{cdispec.DeviceID(uid)},
		}
		if d.ShareID != "" {
			dev.ShareID = ptrUID(d.ShareID)
		}
		out.Devices = append(out.Devices, dev)
	}
	return out
}

func ptrUID(s string) *types.UID {
	u := types.UID(s)
	return &u
}
