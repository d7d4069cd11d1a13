package simulate

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
)

// go-nvml's mock creates GPU and compute instances (CreateGpuInstanceWithPlacement,
// CreateComputeInstance) but has no MIG device handles: a real driver
// hands out one per compute instance (GetMigDeviceHandleByIndex), with its
// own UUID, its ids and its parent. This file supplies them, and the
// by-id lookups of instances, around the mock's own instances.

// migDevice is the MIG device handle of one compute instance.
type migDevice struct {
	mock.Device
	uuid string
}

// migProfile is a GPU instance profile with the compute instance that
// fills it: what a MIG profile name such as "1g.5gb" stands for.
type migProfile struct {
	gi, ci int
}

// migProfiles names the MIG profiles of a GPU as NVIDIA does.
func migProfiles(cfg gpus.Config) map[string]migProfile {
	out := map[string]migProfile{}
	for giID, gi := range cfg.MIGProfiles.GpuInstanceProfiles {
		cis := cfg.MIGProfiles.ComputeInstanceProfiles[giID]
		var ids []int
		for id := range cis {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, ciID := range ids {
			if cis[ciID].SliceCount == gi.SliceCount {
				out[discovery.MIGProfileName(gi, cis[ciID], cfg.MemoryMB<<20)] = migProfile{gi: giID, ci: ciID}
				break
			}
		}
	}
	return out
}

// enableMIG puts d in MIG mode with one GPU instance and one compute
// instance filling it per profile name, each at the first free placement.
func enableMIG(d *server.Device, profiles []string, seed string) ([]*migDevice, error) {
	cfg := d.Config
	table := migProfiles(cfg)
	d.MigMode = nvml.DEVICE_MIG_ENABLE
	used := make([]bool, 16) // memory slices taken
	var out []*migDevice
	for _, name := range profiles {
		p, ok := table[name]
		if !ok {
			names := make([]string, 0, len(table))
			for n := range table {
				names = append(names, n)
			}
			slices.Sort(names)
			return nil, fmt.Errorf("MIG profile %q does not exist on the %s; its profiles are %s", name, cfg.Name, strings.Join(names, ", "))
		}
		giInfo := cfg.MIGProfiles.GpuInstanceProfiles[p.gi]
		placement, ok := takePlacement(cfg.MIGProfiles.GpuInstancePlacements[p.gi], used)
		if !ok {
			return nil, fmt.Errorf("MIG instances %s do not fit on one %s: no placement is left for the %s (drop some instances)", strings.Join(profiles, ","), cfg.Name, name)
		}
		gi, ret := d.CreateGpuInstanceWithPlacement(&giInfo, &placement)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("create GPU instance %s: %v", name, ret)
		}
		ciInfo := cfg.MIGProfiles.ComputeInstanceProfiles[p.gi][p.ci]
		ci, ret := gi.CreateComputeInstance(&ciInfo)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("create compute instance %s: %v", name, ret)
		}
		sgi := gi.(*server.GpuInstance)
		sgi.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
			sgi.RLock()
			defer sgi.RUnlock()
			for c := range sgi.ComputeInstances {
				if c.Info.Id == uint32(id) {
					return c, nvml.SUCCESS
				}
			}
			return nil, nvml.ERROR_NOT_FOUND
		}
		out = append(out, newMIGDevice(d, sgi, ci.(*server.ComputeInstance), name, giInfo, seed))
	}
	max := maxMIGDevices(cfg)
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return max, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		switch {
		case i < 0 || i >= max:
			return nil, nvml.ERROR_INVALID_ARGUMENT
		case i >= len(out):
			return nil, nvml.ERROR_NOT_FOUND
		}
		return out[i], nvml.SUCCESS
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		d.RLock()
		defer d.RUnlock()
		for gi := range d.GpuInstances {
			if gi.Info.Id == uint32(id) {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return out, nil
}

// takePlacement takes the first of placements whose memory slices are all
// free.
func takePlacement(placements []nvml.GpuInstancePlacement, used []bool) (nvml.GpuInstancePlacement, bool) {
	for _, p := range placements {
		free := int(p.Start+p.Size) <= len(used)
		for s := p.Start; free && s < p.Start+p.Size; s++ {
			free = !used[s]
		}
		if free {
			for s := p.Start; s < p.Start+p.Size; s++ {
				used[s] = true
			}
			return p, true
		}
	}
	return nvml.GpuInstancePlacement{}, false
}

// maxMIGDevices is what a real driver answers for GetMaxMigDeviceCount:
// as many devices as the smallest profile allows (7 on an A100).
func maxMIGDevices(cfg gpus.Config) int {
	n := 0
	for _, gi := range cfg.MIGProfiles.GpuInstanceProfiles {
		n = max(n, int(gi.InstanceCount))
	}
	return n
}

func newMIGDevice(parent *server.Device, gi *server.GpuInstance, ci *server.ComputeInstance, profile string, giInfo nvml.GpuInstanceProfileInfo, seed string) *migDevice {
	m := &migDevice{uuid: migUUID(seed, parent.Index, int(gi.Info.Id), int(ci.Info.Id))}
	memory := giInfo.MemorySizeMB << 20
	name := parent.Config.Name + " MIG " + profile
	m.GetUUIDFunc = func() (string, nvml.Return) { return m.uuid, nvml.SUCCESS }
	m.GetNameFunc = func() (string, nvml.Return) { return name, nvml.SUCCESS }
	m.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, nvml.SUCCESS }
	m.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS }
	m.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return int(gi.Info.Id), nvml.SUCCESS }
	m.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return int(ci.Info.Id), nvml.SUCCESS }
	m.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: memory, Free: memory}, nvml.SUCCESS
	}
	m.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
		return nvml.DeviceAttributes{
			MultiprocessorCount: giInfo.MultiprocessorCount, GpuInstanceSliceCount: giInfo.SliceCount,
			ComputeInstanceSliceCount: giInfo.SliceCount, MemorySizeMB: giInfo.MemorySizeMB,
		}, nvml.SUCCESS
	}
	return m
}

// migUUID formats a hash of the instance's place as a MIG device UUID, in
// the form drivers since R470 give them.
func migUUID(seed string, gpu, gi, ci int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("gpuslice-sim/%s/%d/mig/%d/%d", seed, gpu, gi, ci)))
	return fmt.Sprintf("MIG-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
