package driver

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

// A claim holds one slice, or several whole GPUs (a multi-GPU pod: one
// request with count N of a whole-GPU package's class). The shim keeps one
// accounting region per claim, with one memory budget and one compute
// share, so a claim of whole GPUs gets the sum of its GPUs' memory as its
// budget and a share of 100 (no pacing): each GPU's own memory bounds what
// the claim can use there, and the budget never stops the pod from filling
// every GPU. Several partial GPUs cannot be described by one budget and
// one share (a 50 % share would pace both GPUs' kernels against one
// clock), so such a claim is refused.

// checkpointEntry checks a claim's allocation (gpuslice devices this node
// offers: one slice, or whole GPUs each on its own GPU) and returns the
// claim's checkpoint entry.
func (p *Plugin) checkpointEntry(claim *resourceapi.ResourceClaim) (checkpoint.Claim, error) {
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
			return checkpoint.Claim{}, fmt.Errorf("claim %s is allocated device %s/%s, which this node (%s) does not offer: was the node's GPU set or --fractions changed? Delete the pod so the claim is allocated again", ref, r.Pool, r.Device, p.cfg.NodeName)
		}
		entry.Devices = append(entry.Devices, checkpoint.Device{
			Request: r.Request, Pool: r.Pool, Name: r.Device,
			GPUUUID: dev.GPU.UUID, GPUIndex: dev.GPU.Index, GPUMinor: dev.GPU.Minor, Fraction: dev.Fraction, MemoryBytes: dev.MemoryBytes,
		})
	}
	if err := checkShape(ref, entry.Devices); err != nil {
		return checkpoint.Claim{}, err
	}
	return entry, nil
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
		if d.Fraction != contract.ComputeWhole {
			return fmt.Errorf("claim %s is allocated %d gpuslice devices and %s is a %d%% slice: a claim may hold several devices only when each is a whole GPU "+
				"(the shim keeps one memory budget and one compute share per claim, which cannot describe several partial GPUs); "+
				"ask for one slice per claim, or for N devices of a whole-GPU (%d%%) package's device class", ref, len(devs), d.Name, d.Fraction, contract.ComputeWhole)
		}
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

// conflicts is the last line of defence behind the scheduler: a device is
// never prepared for two claims, and a GPU's slices never add up to more
// than the GPU.
func conflicts(cp *checkpoint.Checkpoint, uid string, entry checkpoint.Claim) error {
	for _, d := range entry.Devices {
		share := d.Fraction
		for other, c := range cp.Claims {
			if other == uid {
				continue
			}
			for _, od := range c.Devices {
				if od.Name == d.Name {
					return fmt.Errorf("device %s is already prepared for claim %s/%s (uid %s); refusing to share it with %s/%s", d.Name, c.Namespace, c.Name, other, entry.Namespace, entry.Name)
				}
				if od.GPUUUID == d.GPUUUID {
					share += od.Fraction
				}
			}
		}
		if share > contract.ComputeWhole {
			return fmt.Errorf("claim %s/%s would bring GPU %s to %d%% allocated; refusing to oversubscribe it", entry.Namespace, entry.Name, d.GPUUUID, share)
		}
	}
	return nil
}

// result lists every device of the claim, each with the claim's one CDI
// device: the kubelet gives a container the devices of the requests it
// names, and the container runtime injects a repeated CDI device once.
func (p *Plugin) result(uid string, c checkpoint.Claim) kubeletplugin.PrepareResult {
	var out kubeletplugin.PrepareResult
	for _, d := range c.Devices {
		out.Devices = append(out.Devices, kubeletplugin.Device{
			Requests: []string{d.Request}, PoolName: d.Pool, DeviceName: d.Name, CDIDeviceIDs: []string{cdispec.DeviceID(uid)},
		})
	}
	return out
}
