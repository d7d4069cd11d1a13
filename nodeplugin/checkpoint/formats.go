package checkpoint

import "encoding/json"

// Version is the file format Save and Stage write.
const Version = "v2"

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
	BootID string           `json:"bootID"`
	Claims map[string]Claim `json:"claims"`
}

func fromV0(c checkpointV0) checkpointV1 { return checkpointV1(c) }

// fromV1 turns each claim's one device into a list of one.
func fromV1(c checkpointV1) checkpointV2 {
	out := checkpointV2{BootID: c.BootID, Claims: make(map[string]Claim, len(c.Claims))}
	for uid, old := range c.Claims {
		out.Claims[uid] = Claim{
			State: old.State, Namespace: old.Namespace, Name: old.Name, PodUIDs: old.PodUIDs,
			Devices: []Device{{
				Request: old.Request, Pool: old.Pool, Name: old.Device, GPUUUID: old.GPUUUID,
				GPUIndex: old.GPUIndex, GPUMinor: old.GPUMinor, Fraction: old.Fraction, MemoryBytes: old.MemoryBytes,
			}},
		}
	}
	return out
}

func fromV2(c checkpointV2) *Checkpoint {
	cp := New(c.BootID)
	for uid, claim := range c.Claims {
		cp.Claims[uid] = claim
	}
	return cp
}

func toV2(cp *Checkpoint) checkpointV2 { return checkpointV2{BootID: cp.BootID, Claims: cp.Claims} }
