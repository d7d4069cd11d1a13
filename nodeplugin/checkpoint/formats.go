package checkpoint

import (
	"encoding/json"

	"github.com/gpuslice/gpuslice/contract"
)

// Latest is the newest file format this package reads and writes.
const Latest = contract.CheckpointV4

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

// fileV3 is the envelope of formats v3 and v4 (v1's).
type fileV3 struct {
	Version  string          `json:"version"`
	Checksum uint32          `json:"checksum"` // CRC-32C of Data
	Data     json.RawMessage `json:"data"`     // a checkpointV3 or checkpointV4
}

// checkpointV3 is format v3: a device may be a share of an any-size or
// time-sliced device (its sharing, share ID and shares), which a v2 reader
// would take for a partition and restore with the wrong limits.
// testdata/checkpoint-v3.json holds one.
type checkpointV3 struct {
	BootID string             `json:"bootID"`
	Claims map[string]claimV3 `json:"claims"`
}

type claimV3 struct {
	State     State      `json:"state"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Devices   []deviceV3 `json:"devices"`
	PodUIDs   []string   `json:"podUIDs,omitempty"`
}

type deviceV3 struct {
	Request     string `json:"request"`
	Pool        string `json:"pool"`
	Name        string `json:"name"`
	GPUUUID     string `json:"gpuUUID"`
	GPUIndex    int    `json:"gpuIndex"`
	GPUMinor    int    `json:"gpuMinor"`
	Fraction    int    `json:"fraction"`
	MemoryBytes uint64 `json:"memoryBytes"`
	Sharing     string `json:"sharing,omitempty"` // empty: a partition
	ShareID     string `json:"shareID,omitempty"`
	Shares      int64  `json:"shares,omitempty"`
}

// checkpointV4 is format v4: v3 with MIG devices (a device's sharing "mig"
// and its "mig" instance), which a v3 reader would take for a software
// slice and restore with the shim and the whole parent GPU visible. Its
// envelope is v3's; only the version tells a v3 reader to keep off.
// testdata/checkpoint-v4.json holds one.
type checkpointV4 struct {
	BootID string             `json:"bootID"`
	Claims map[string]claimV4 `json:"claims"`
}

type claimV4 struct {
	State     State      `json:"state"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Devices   []deviceV4 `json:"devices"`
	PodUIDs   []string   `json:"podUIDs,omitempty"`
}

type deviceV4 struct {
	Request     string `json:"request"`
	Pool        string `json:"pool"`
	Name        string `json:"name"`
	GPUUUID     string `json:"gpuUUID"`
	GPUIndex    int    `json:"gpuIndex"`
	GPUMinor    int    `json:"gpuMinor"`
	Fraction    int    `json:"fraction"`
	MemoryBytes uint64 `json:"memoryBytes"`
	Sharing     string `json:"sharing,omitempty"`
	ShareID     string `json:"shareID,omitempty"`
	Shares      int64  `json:"shares,omitempty"`
	MIG         *migV4 `json:"mig,omitempty"`
}

type migV4 struct {
	UUID            string `json:"uuid"`
	Profile         string `json:"profile"`
	Placement       int    `json:"placement"`
	GPUInstance     int    `json:"gpuInstance"`
	ComputeInstance int    `json:"computeInstance"`
}

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
	out := checkpointV3{BootID: c.BootID, Claims: make(map[string]claimV3, len(c.Claims))}
	for uid, old := range c.Claims {
		claim := claimV3{State: old.State, Namespace: old.Namespace, Name: old.Name, PodUIDs: old.PodUIDs}
		for _, d := range old.Devices {
			claim.Devices = append(claim.Devices, deviceV3{Request: d.Request, Pool: d.Pool, Name: d.Name, GPUUUID: d.GPUUUID,
				GPUIndex: d.GPUIndex, GPUMinor: d.GPUMinor, Fraction: d.Fraction, MemoryBytes: d.MemoryBytes})
		}
		out.Claims[uid] = claim
	}
	return out
}

// fromV3 reads every device as v4 does: no device of v3 is a MIG one.
func fromV3(c checkpointV3) checkpointV4 {
	out := checkpointV4{BootID: c.BootID, Claims: make(map[string]claimV4, len(c.Claims))}
	for uid, old := range c.Claims {
		claim := claimV4{State: old.State, Namespace: old.Namespace, Name: old.Name, PodUIDs: old.PodUIDs}
		for _, d := range old.Devices {
			claim.Devices = append(claim.Devices, deviceV4{Request: d.Request, Pool: d.Pool, Name: d.Name, GPUUUID: d.GPUUUID,
				GPUIndex: d.GPUIndex, GPUMinor: d.GPUMinor, Fraction: d.Fraction, MemoryBytes: d.MemoryBytes,
				Sharing: d.Sharing, ShareID: d.ShareID, Shares: d.Shares})
		}
		out.Claims[uid] = claim
	}
	return out
}

// fromV4 is the live checkpoint of the newest format.
func fromV4(c checkpointV4) *Checkpoint {
	cp := New(c.BootID)
	for uid, old := range c.Claims {
		claim := Claim{State: old.State, Namespace: old.Namespace, Name: old.Name, PodUIDs: old.PodUIDs}
		for _, d := range old.Devices {
			dev := Device{Request: d.Request, Pool: d.Pool, Name: d.Name, GPUUUID: d.GPUUUID, GPUIndex: d.GPUIndex, GPUMinor: d.GPUMinor,
				Fraction: d.Fraction, MemoryBytes: d.MemoryBytes, Sharing: d.Sharing, ShareID: d.ShareID, Shares: d.Shares}
			if d.MIG != nil {
				dev.MIG = &MIGInstance{UUID: d.MIG.UUID, Profile: d.MIG.Profile, Placement: d.MIG.Placement,
					GPUInstance: d.MIG.GPUInstance, ComputeInstance: d.MIG.ComputeInstance}
			}
			claim.Devices = append(claim.Devices, dev)
		}
		cp.Claims[uid] = claim
	}
	return cp
}

// encode is the checkpoint in the oldest format that holds it: v1 while
// every claim has one device and every device is a partition, v2 while
// every device is a partition, and else the format its devices' sharing
// needs (contract.CheckpointFormatFor, which the engine reads too when it
// checks that a release reads a node's checkpoint): v3 for a share of an
// any-size or time-sliced device, v4 for a MIG device.
func encode(cp *Checkpoint) (string, any) {
	single, format := true, ""
	for _, c := range cp.Claims {
		single = single && len(c.Devices) == 1
		for _, d := range c.Devices {
			sharing := d.Sharing
			if d.MIG != nil {
				sharing = contract.SharingMIG
			}
			if f := contract.CheckpointFormatFor(sharing); f == contract.CheckpointV4 || (f != "" && format == "") {
				format = f
			}
		}
	}
	switch format {
	case contract.CheckpointV4:
		return format, toV4(cp)
	case contract.CheckpointV3:
		return format, toV3(cp)
	}
	if single {
		out := checkpointV1{BootID: cp.BootID, Claims: make(map[string]claimV1, len(cp.Claims))}
		for uid, c := range cp.Claims {
			d := c.Devices[0]
			out.Claims[uid] = claimV1{State: c.State, Namespace: c.Namespace, Name: c.Name, Request: d.Request, Pool: d.Pool, Device: d.Name,
				GPUUUID: d.GPUUUID, GPUIndex: d.GPUIndex, GPUMinor: d.GPUMinor, Fraction: d.Fraction, MemoryBytes: d.MemoryBytes, PodUIDs: c.PodUIDs}
		}
		return "v1", out
	}
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

func toV3(cp *Checkpoint) checkpointV3 {
	out := checkpointV3{BootID: cp.BootID, Claims: make(map[string]claimV3, len(cp.Claims))}
	for uid, c := range cp.Claims {
		old := claimV3{State: c.State, Namespace: c.Namespace, Name: c.Name, PodUIDs: c.PodUIDs}
		for _, d := range c.Devices {
			old.Devices = append(old.Devices, deviceV3{Request: d.Request, Pool: d.Pool, Name: d.Name, GPUUUID: d.GPUUUID,
				GPUIndex: d.GPUIndex, GPUMinor: d.GPUMinor, Fraction: d.Fraction, MemoryBytes: d.MemoryBytes,
				Sharing: d.Sharing, ShareID: d.ShareID, Shares: d.Shares})
		}
		out.Claims[uid] = old
	}
	return out
}

func toV4(cp *Checkpoint) checkpointV4 {
	out := checkpointV4{BootID: cp.BootID, Claims: make(map[string]claimV4, len(cp.Claims))}
	for uid, c := range cp.Claims {
		old := claimV4{State: c.State, Namespace: c.Namespace, Name: c.Name, PodUIDs: c.PodUIDs}
		for _, d := range c.Devices {
			dev := deviceV4{Request: d.Request, Pool: d.Pool, Name: d.Name, GPUUUID: d.GPUUUID,
				GPUIndex: d.GPUIndex, GPUMinor: d.GPUMinor, Fraction: d.Fraction, MemoryBytes: d.MemoryBytes,
				Sharing: d.Sharing, ShareID: d.ShareID, Shares: d.Shares}
			if d.MIG != nil {
				dev.MIG = &migV4{UUID: d.MIG.UUID, Profile: d.MIG.Profile, Placement: d.MIG.Placement,
					GPUInstance: d.MIG.GPUInstance, ComputeInstance: d.MIG.ComputeInstance}
			}
			old.Devices = append(old.Devices, dev)
		}
		out.Claims[uid] = old
	}
	return out
}
