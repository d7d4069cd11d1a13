package accounting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The limits file (include/gpuslice.h, "The limits file"): the claim's
// limits, written by the node plugin and mounted read-only into the claim's
// containers, and the plugin's observation of the claim's device memory.
const (
	LimitsFile    = "gpuslice.limits"
	LimitsMagic   = 0x5354494d494c5347 // "GSLIMITS", little-endian
	LimitsVersion = 1
	LimitsSize    = 128
)

// Limits field offsets.
const (
	limOffMagic           = 0
	limOffVersion         = 8
	limOffSize            = 12
	limOffMemoryLimit     = 16
	limOffComputeShare    = 24
	limOffFlags           = 28
	limOffComputeWindowMS = 32
	limOffSamplePeriodMS  = 36
	limOffContextOverhead = 40
	limOffCreatedUnixNS   = 48
	limOffObservedUsed    = 64
	limOffObservedSeq     = 72
	limOffObservedUnixNS  = 80
)

// Limits is what the plugin grants a claim, and what it last observed.
type Limits struct {
	MemoryLimit     uint64 // bytes
	ComputeShare    uint32 // percent, 1..100
	Burst           bool
	ComputeWindow   time.Duration
	SamplePeriod    time.Duration // how often the enforcer updates the observation
	ContextOverhead uint64        // bytes the library charges per CUDA context
	Created         time.Time

	// ObservedUsed is the device memory NVML showed for the claim's
	// processes in the sample begun at Observed; ObservedSeq is twice the
	// number of observations (odd while one is written).
	ObservedUsed uint64
	ObservedSeq  uint64
	Observed     time.Time
}

// ErrNotLimits is returned for data that is not a limits file.
var ErrNotLimits = errors.New("not a gpuslice limits file")

func (l Limits) validate() error {
	switch {
	case l.MemoryLimit == 0:
		return errors.New("no memory limit")
	case l.ComputeShare == 0 || l.ComputeShare > 100:
		return fmt.Errorf("compute share %d%% is not 1..100", l.ComputeShare)
	case l.ComputeWindow < time.Millisecond || l.ComputeWindow > time.Minute:
		return fmt.Errorf("compute window %v is not 1 ms..1 min", l.ComputeWindow)
	}
	return nil
}

// EncodeLimits returns a limits file holding l (its observation included).
func EncodeLimits(l Limits) []byte {
	b := make([]byte, LimitsSize)
	le := binary.LittleEndian
	le.PutUint64(b[limOffMagic:], LimitsMagic)
	le.PutUint32(b[limOffVersion:], LimitsVersion)
	le.PutUint32(b[limOffSize:], LimitsSize)
	le.PutUint64(b[limOffMemoryLimit:], l.MemoryLimit)
	le.PutUint32(b[limOffComputeShare:], l.ComputeShare)
	if l.Burst {
		le.PutUint32(b[limOffFlags:], FlagComputeBurst)
	}
	le.PutUint32(b[limOffComputeWindowMS:], uint32(l.ComputeWindow/time.Millisecond))
	le.PutUint32(b[limOffSamplePeriodMS:], uint32(l.SamplePeriod/time.Millisecond))
	le.PutUint64(b[limOffContextOverhead:], l.ContextOverhead)
	if !l.Created.IsZero() {
		le.PutUint64(b[limOffCreatedUnixNS:], uint64(l.Created.UnixNano()))
	}
	le.PutUint64(b[limOffObservedUsed:], l.ObservedUsed)
	le.PutUint64(b[limOffObservedSeq:], l.ObservedSeq)
	if !l.Observed.IsZero() {
		le.PutUint64(b[limOffObservedUnixNS:], uint64(l.Observed.UnixNano()))
	}
	return b
}

// DecodeLimits parses a copy of a limits file.
func DecodeLimits(b []byte) (Limits, error) {
	le := binary.LittleEndian
	if len(b) < 16 || le.Uint64(b[limOffMagic:]) != LimitsMagic {
		return Limits{}, ErrNotLimits
	}
	if v := le.Uint32(b[limOffVersion:]); v != LimitsVersion {
		return Limits{}, fmt.Errorf("limits file version %d, this reader knows version %d", v, LimitsVersion)
	}
	if n := le.Uint32(b[limOffSize:]); n < LimitsSize || len(b) < LimitsSize {
		return Limits{}, fmt.Errorf("limits file is %d bytes and says %d, want at least %d", len(b), n, LimitsSize)
	}
	l := Limits{
		MemoryLimit:     le.Uint64(b[limOffMemoryLimit:]),
		ComputeShare:    le.Uint32(b[limOffComputeShare:]),
		Burst:           le.Uint32(b[limOffFlags:])&FlagComputeBurst != 0,
		ComputeWindow:   time.Duration(le.Uint32(b[limOffComputeWindowMS:])) * time.Millisecond,
		SamplePeriod:    time.Duration(le.Uint32(b[limOffSamplePeriodMS:])) * time.Millisecond,
		ContextOverhead: le.Uint64(b[limOffContextOverhead:]),
		ObservedUsed:    le.Uint64(b[limOffObservedUsed:]),
		ObservedSeq:     le.Uint64(b[limOffObservedSeq:]),
	}
	if ns := le.Uint64(b[limOffCreatedUnixNS:]); ns != 0 {
		l.Created = time.Unix(0, int64(ns))
	}
	if ns := le.Uint64(b[limOffObservedUnixNS:]); ns != 0 {
		l.Observed = time.Unix(0, int64(ns))
	}
	return l, l.validate()
}
