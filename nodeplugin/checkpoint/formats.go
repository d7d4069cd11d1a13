package checkpoint

import (
	"encoding/json"

	"github.com/gpuslice/gpuslice/contract"
)

// Latest is the newest file format this package reads and writes.
const Latest = "v4"

// The on-disk formats, oldest first. The version stays outside the
// checksummed data so that a reader can tell a format it cannot check from
// a damaged file; a damaged version string reads as an unknown format,
// which is refused with the file kept: the safe side. The claims' JSON is
// part of each format: a change an older reader would misread needs a new
// version.

// fileV0 is the unversioned file of the first releases: the same
// checksummed data as v1, without the version.
type fileV0 struct {
	Checksum uint32          `json:"checksum"`
	Data     json.RawMessage `json:"data"` // a checkpointV0
}

type checkpointV0 struct {
	BootID string             `json:"bootID"`
	Claims map[string]claimV1 `json:"claims"`
}

// fileV1 is format v1: one device per claim.
type fileV1 struct {
	Version  string          `json:"version"`
	Checksum uint32          `json:"checksum"` // CRC-32C of Data
	Data     json.RawMessage `json:"data"`     // a checkpointV1
}

type checkpointV1 struct {
	BootID string             `json:"bootID"`
	Claims map[string]claimV1 `json:"claims"`
}

// claimV1 is a claim as v0 and v1 wrote it, its one device inline.
type claimV1 struct {
	State       State    `json:"state"`
	Namespace   string   `json:"namespace"`
	Name        string   `json:"name"`
	Request     string   `json:"request"`
	Pool        string   `json:"pool"`
	Device      string   `json:"device"`
	GPUUUID     string   `json:"gpuUUID"`
	GPUIndex    int      `json:"gpuIndex"`
	GPUMinor    int      `json:"gpuMinor"`
	Fraction    int      `json:"fraction"`
	MemoryBytes uint64   `json:"memoryBytes"`
	PodUIDs     []string `json:"podUIDs,omitempty"`
}

// fileV2 is format v2: a claim lists its devices (several whole GPUs for a
// multi-GPU pod).
type fileV2 struct {
	Version  string          `json:"version"`
	Checksum uint32          `json:"checksum"` // CRC-32C of Data
	Data     json.RawMessage `json:"data"`     // a checkpointV2
}

type checkpointV2 struct {
	BootID string             `json:"bootID"`
	Claims map[string]claimV2 `json:"claims"`
}

// claimV2 is a claim as v2 wrote it: its devices, every one a partition.
type claimV2 struct {
	State     State      `json:"state"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Devices   []deviceV2 `json:"devices"`
	PodUIDs   []string   `json:"podUIDs,omitempty"`
}

type deviceV2 struct {
	Request     string `json:"request"`
	Pool        string `json:"pool"`
	Name        string `json:"name"`
	GPUUUID     string `json:"gpuUUID"`
	GPUIndex    int    `json:"gpuIndex"`
	GPUMinor    int    `json:"gpuMinor"`
	Fraction    int    `json:"fraction"`
	MemoryBytes uint64 `json:"memoryBytes"`
}

// fileV3 is format v3: a device may be a share of an any-size or
// time-sliced device (its sharing, share ID and shares), which a v2 reader
// would take for a partition and restore with the wrong limits.
type fileV3 struct {
	Version  string          `json:"version"`
	Checksum uint32          `json:"checksum"` // CRC-32C of Data
	Data     json.RawMessage `json:"data"`     // a checkpointV3
}

type checkpointV3 struct {
	BootID string           `json:"bootID"`
	Claims map[string]Claim `json:"claims"`
}

// Format v4 is v3 with MIG devices (a device's sharing "mig" and its "mig"
// instance): a v3 reader would take one for a software slice and restore it
// with the shim and the whole parent GPU visible. Its envelope and data are
// v3's; only the version tells a v3 reader to keep off.

func fromV0(c checkpointV0) checkpointV1 { return checkpointV1(c) }

// fromV1 turns each claim's one device into a list of one.
func fromV1(c checkpointV1) checkpointV2 {
	out := checkpointV2{BootID: c.BootID, Claims: make(map[string]claimV2, len(c.Claims))}
	for uid, old := range c.Claims {
		out.Claims[uid] = claimV2{
			State: old.State, Namespace: old.Namespace, Name: old.Name, PodUIDs: old.PodUIDs,
			Devices: []deviceV2{{
				Request: old.Request, Pool: old.Pool, Name: old.Device, GPUUUID: old.GPUUUID,
				GPUIndex: old.GPUIndex, GPUMinor: old.GPUMinor, Fraction: old.Fraction, MemoryBytes: old.MemoryBytes,
			}},
		}
	}
	return out
}

// fromV2 reads every device as the partition it is.
func fromV2(c checkpointV2) checkpointV3 {
	out := checkpointV3{BootID: c.BootID, Claims: make(map[string]Claim, len(c.Claims))}
	for uid, old := range c.Claims {
		claim := Claim{State: old.State, Namespace: old.Namespace, Name: old.Name, PodUIDs: old.PodUIDs}
		for _, d := range old.Devices {
			claim.Devices = append(claim.Devices, deviceV3Of(d))
		}
		out.Claims[uid] = claim
	}
	return out
}

func deviceV3Of(d deviceV2) Device {
	return Device{Request: d.Request, Pool: d.Pool, Name: d.Name, GPUUUID: d.GPUUUID, GPUIndex: d.GPUIndex, GPUMinor: d.GPUMinor,
		Fraction: d.Fraction, MemoryBytes: d.MemoryBytes}
}

func fromV3(c checkpointV3) *Checkpoint {
	cp := New(c.BootID)
	for uid, claim := range c.Claims {
		cp.Claims[uid] = claim
	}
	return cp
}

// encode is the checkpoint in the oldest format that holds it: v1 while
// every claim has one device and every device is a partition, v2 while
// every device is a partition, v3 once a claim holds a share, v4 once one
// holds a MIG device.
func encode(cp *Checkpoint) (string, any) {
	single, partitions, mig := true, true, false
	for _, c := range cp.Claims {
		single = single && len(c.Devices) == 1
		for _, d := range c.Devices {
			partitions = partitions && d.Partition()
			mig = mig || d.MIG != nil || d.Sharing == contract.SharingMIG
		}
	}
	switch {
	case mig:
		return "v4", checkpointV3{BootID: cp.BootID, Claims: cp.Claims}
	case partitions && single:
		out := checkpointV1{BootID: cp.BootID, Claims: make(map[string]claimV1, len(cp.Claims))}
		for uid, c := range cp.Claims {
			d := c.Devices[0]
			out.Claims[uid] = claimV1{State: c.State, Namespace: c.Namespace, Name: c.Name, Request: d.Request, Pool: d.Pool, Device: d.Name,
				GPUUUID: d.GPUUUID, GPUIndex: d.GPUIndex, GPUMinor: d.GPUMinor, Fraction: d.Fraction, MemoryBytes: d.MemoryBytes, PodUIDs: c.PodUIDs}
		}
		return "v1", out
	case partitions:
		out := checkpointV2{BootID: cp.BootID, Claims: make(map[string]claimV2, len(cp.Claims))}
		for uid, c := range cp.Claims {
			old := claimV2{State: c.State, Namespace: c.Namespace, Name: c.Name, PodUIDs: c.PodUIDs}
			for _, d := range c.Devices {
				old.Devices = append(old.Devices, deviceV2{Request: d.Request, Pool: d.Pool, Name: d.Name, GPUUUID: d.GPUUUID,
					GPUIndex: d.GPUIndex, GPUMinor: d.GPUMinor, Fraction: d.Fraction, MemoryBytes: d.MemoryBytes})
			}
			out.Claims[uid] = old
		}
		return "v2", out
	}
	return "v3", checkpointV3{BootID: cp.BootID, Claims: cp.Claims}
}
