// Package accounting reads and writes a claim's accounting files (see
// ../include/gpuslice.h, which this package follows field by field): the
// limits file the node plugin writes when it prepares a claim (limits.go),
// and the accounting region that libgpuslice.so, preloaded into every
// process of the claim, charges device memory against. The node plugin uses
// it for metrics, for its enforcer's observations and to create both files.
// Every field of a region is untrusted: any process of the claim can write
// it. Pure Go: no cgo.
package accounting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Layout constants of region version 1 (include/gpuslice.h).
const (
	Magic      = 0x4543494c53555047 // "GPUSLICE", little-endian
	Version    = 1
	HeaderSize = 256
	SlotSize   = 128
	SlotCount  = 512
	RegionSize = HeaderSize + SlotSize*SlotCount

	// Bounds on the geometry a region may declare.
	MaxHeaderSize = 4096
	MaxSlotSize   = 1024
	MaxSlotCount  = 4096
	MaxRegionSize = MaxHeaderSize + MaxSlotSize*MaxSlotCount

	FlagComputeBurst = 0x1

	SlotFree = 0
	SlotLive = 1

	// Open-file-description lock offsets (1 byte each).
	LockInit     = 1 << 30
	LockPresence = LockInit + 1
	LockSlot0    = LockInit + 64
)

// Header field offsets.
const (
	offMagic           = 0
	offVersion         = 8
	offHeaderSize      = 12
	offSlotSize        = 16
	offSlotCount       = 20
	offMemoryLimit     = 24
	offComputeShare    = 32
	offFlags           = 36
	offCreatedUnixNS   = 40
	offComputeWindowMS = 48
	offUsed            = 64
	offHighWater       = 72
	offOOMCount        = 80
	offReclaimedBytes  = 88
	offReclaimedProcs  = 96
	offAttachCount     = 104
	offPaceTokensNS    = 128
	offPaceLastNS      = 136
	offGPUBusyNS       = 144
	offThrottledNS     = 152
	offLaunches        = 160
)

// Slot field offsets.
const (
	slotState        = 0
	slotPID          = 4
	slotAttachUnixNS = 8
	slotUsed         = 16
	slotContextBytes = 24
	slotAllocations  = 32
	slotGPUBusyNS    = 40
	slotLaunches     = 48
	slotOOMCount     = 56
	slotComm         = 64
)

// Region is a snapshot of an accounting region.
type Region struct {
	Version    uint32
	HeaderSize uint32
	SlotSize   uint32
	SlotCount  uint32
	// MemoryLimit, ComputeShare, Burst and ComputeWindow are the copy of
	// the limits written when the region was created, for libraries older
	// than the limits file: not the claim's limits (ReadLimits reads those).
	MemoryLimit   uint64 // bytes
	ComputeShare  uint32 // percent
	Burst         bool
	ComputeWindow time.Duration
	Created       time.Time

	Used               uint64 // bytes charged by every process of the claim
	HighWater          uint64
	OOMCount           uint64 // allocations refused for the budget
	ReclaimedBytes     uint64 // credited back from dead processes
	ReclaimedProcesses uint64
	Attaches           uint64 // processes that attached since creation

	PaceTokens time.Duration // GPU time the claim may use before pacing
	GPUBusy    time.Duration // measured GPU time of paced launches
	Throttled  time.Duration // time launches were held back
	Launches   uint64        // paced launches

	// Processes are the slots in use, live or left by a dead process
	// (reclaimed at the next allocation that needs the memory).
	Processes []Process
}

// Process is one process's slot.
type Process struct {
	Slot         int
	PID          uint32 // in the process's own PID namespace
	Command      string
	Attached     time.Time
	Used         uint64 // bytes it has charged
	ContextBytes uint64 // the part of Used that is context overhead
	Allocations  uint64 // live allocations
	GPUBusy      time.Duration
	Launches     uint64
	OOMCount     uint64
	// Alive is known only for regions read from a file (ReadFile): whether
	// the process still holds its slot's lock.
	Alive bool
}

// ErrNotRegion is returned for data that is not an accounting region.
var ErrNotRegion = errors.New("not a gpuslice accounting region")

// Decode parses a copy of a region. The region's own geometry fields are
// checked against the bounds and b's length before any slot is read.
func Decode(b []byte) (*Region, error) {
	le := binary.LittleEndian
	if len(b) < 64 || le.Uint64(b[offMagic:]) != Magic {
		return nil, ErrNotRegion
	}
	r := &Region{
		Version:    le.Uint32(b[offVersion:]),
		HeaderSize: le.Uint32(b[offHeaderSize:]),
		SlotSize:   le.Uint32(b[offSlotSize:]),
		SlotCount:  le.Uint32(b[offSlotCount:]),
	}
	if r.Version != Version {
		return r, fmt.Errorf("region layout version %d, this reader knows version %d", r.Version, Version)
	}
	if r.HeaderSize < HeaderSize || r.HeaderSize > MaxHeaderSize || r.SlotSize < SlotSize || r.SlotSize > MaxSlotSize ||
		r.SlotCount == 0 || r.SlotCount > MaxSlotCount {
		return r, fmt.Errorf("region geometry is invalid (header %d, slot %d × %d)", r.HeaderSize, r.SlotSize, r.SlotCount)
	}
	if need := uint64(r.HeaderSize) + uint64(r.SlotSize)*uint64(r.SlotCount); uint64(len(b)) < need {
		return r, fmt.Errorf("region is %d bytes, its header needs %d", len(b), need)
	}
	// the limits' copy: a library older than the limits file reads it, and
	// any process of the claim can write it; the claim's limits are in its
	// limits file
	r.MemoryLimit = le.Uint64(b[offMemoryLimit:])
	r.ComputeShare = le.Uint32(b[offComputeShare:])
	r.Burst = le.Uint32(b[offFlags:])&FlagComputeBurst != 0
	r.ComputeWindow = time.Duration(le.Uint32(b[offComputeWindowMS:])) * time.Millisecond
	r.Created = time.Unix(0, int64(le.Uint64(b[offCreatedUnixNS:])))
	r.Used = le.Uint64(b[offUsed:])
	r.HighWater = le.Uint64(b[offHighWater:])
	r.OOMCount = le.Uint64(b[offOOMCount:])
	r.ReclaimedBytes = le.Uint64(b[offReclaimedBytes:])
	r.ReclaimedProcesses = le.Uint64(b[offReclaimedProcs:])
	r.Attaches = le.Uint64(b[offAttachCount:])
	r.PaceTokens = time.Duration(int64(le.Uint64(b[offPaceTokensNS:])))
	r.GPUBusy = time.Duration(le.Uint64(b[offGPUBusyNS:]))
	r.Throttled = time.Duration(le.Uint64(b[offThrottledNS:]))
	r.Launches = le.Uint64(b[offLaunches:])
	for i := 0; i < int(r.SlotCount); i++ {
		s := b[int(r.HeaderSize)+i*int(r.SlotSize):]
		if le.Uint32(s[slotState:]) != SlotLive {
			continue
		}
		r.Processes = append(r.Processes, Process{
			Slot:         i,
			PID:          le.Uint32(s[slotPID:]),
			Command:      strings.TrimRight(string(s[slotComm:slotComm+16]), "\x00"),
			Attached:     time.Unix(0, int64(le.Uint64(s[slotAttachUnixNS:]))),
			Used:         le.Uint64(s[slotUsed:]),
			ContextBytes: le.Uint64(s[slotContextBytes:]),
			Allocations:  le.Uint64(s[slotAllocations:]),
			GPUBusy:      time.Duration(le.Uint64(s[slotGPUBusyNS:])),
			Launches:     le.Uint64(s[slotLaunches:]),
			OOMCount:     le.Uint64(s[slotOOMCount:]),
		})
	}
	return r, nil
}

// Encode returns a fresh version-1 region: the layout a library creates.
func Encode(limit uint64, share uint32, burst bool, window time.Duration, created time.Time) []byte {
	b := make([]byte, RegionSize)
	le := binary.LittleEndian
	le.PutUint64(b[offMagic:], Magic)
	le.PutUint32(b[offVersion:], Version)
	le.PutUint32(b[offHeaderSize:], HeaderSize)
	le.PutUint32(b[offSlotSize:], SlotSize)
	le.PutUint32(b[offSlotCount:], SlotCount)
	le.PutUint64(b[offMemoryLimit:], limit)
	le.PutUint32(b[offComputeShare:], share)
	if burst {
		le.PutUint32(b[offFlags:], FlagComputeBurst)
	}
	le.PutUint64(b[offCreatedUnixNS:], uint64(created.UnixNano()))
	le.PutUint32(b[offComputeWindowMS:], uint32(window/time.Millisecond))
	return b
}
