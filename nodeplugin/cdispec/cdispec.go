// Package cdispec writes the Container Device Interface spec of a prepared
// claim: its GPUs' device nodes and driver files, the shim library and an
// /etc/ld.so.preload that loads it, the claim's accounting directory
// (read-write) with its limits file mounted read-only on top, and the
// limits in the environment too (for programs that read them; the shim
// takes them from the file); for a MIG instance its device
// nodes and UUID and nothing of the shim (migspec.go). One spec file per claim, named
// after the claim's UID, so a container runtime never reuses a stale one.
package cdispec

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuslice/gpuslice/contract"
)

// Vendor and class of gpuslice's CDI devices: gpuslice.dev/claim=<claim UID>.
const (
	Vendor = contract.DriverName
	Class  = "claim"
	Kind   = Vendor + "/" + Class
)

// EnvGPUUUID tells programs in the container which physical GPUs the
// claim is on: one UUID for a slice, several, comma-separated, for a claim
// of whole GPUs.
const EnvGPUUUID = "GPUSLICE_GPU_UUID"

// Slice is what the spec of one claim needs to know.
type Slice struct {
	ClaimUID string
	// GPUs are the claim's GPUs: one for a slice, several for a claim of
	// whole GPUs (a multi-GPU pod).
	GPUs []GPU
	// Unlimited is a time-sliced claim: the GPU whole, with neither the
	// shim nor an accounting region, so nothing holds it to a share.
	Unlimited bool
	// MemoryBytes and Fraction are the claim's limits, which the shim
	// enforces for the claim as a whole (one accounting region).
	MemoryBytes uint64
	Fraction    int // compute share, percent
	// AccountingDir is the claim's host directory holding the shim's limits
	// file and region.
	AccountingDir string
	// MIG is a MIG claim's instance, on its one GPU: the hardware holds it
	// to the instance, so neither the shim nor limits are set.
	MIG *MIG
}

// GPU is one of a claim's GPUs.
type GPU struct {
	UUID  string
	Minor int // its /dev/nvidia<Minor>
	// Model ("NVIDIA A100-SXM4-40GB") and ComputeCapability ("8.0") are
	// told to a simulated driver (migspec.go).
	Model             string
	ComputeCapability string
	// SimulatedState is a simulated GPU's state file on the host (the
	// simulated silicon, which every container on the GPU shares); empty
	// for a real GPU.
	SimulatedState string
}

// Host is where the node's shared files are.
type Host struct {
	// ShimLibrary is the host path of the installed, versioned shim library.
	ShimLibrary string
	// PreloadFile is a host file holding contract.PreloadFileContent.
	PreloadFile string
	// DriverFiles are the driver's libraries and tools (FindDriverFiles).
	DriverFiles []DriverFile
	// Devices give the GPU device nodes their numbers.
	Devices Devices
}

// DeviceID is the qualified CDI device name of a claim's slice.
func DeviceID(claimUID string) string { return parser.QualifiedName(Vendor, Class, claimUID) }

// SpecName is the file name (without directory) of a claim's spec.
func SpecName(claimUID string) string {
	return cdi.GenerateTransientSpecName(Vendor, Class, claimUID) + ".json"
}

// Build returns the spec of one claim.
func Build(s Slice, h Host) (*specs.Spec, error) {
	if len(s.GPUs) == 0 {
		return nil, fmt.Errorf("CDI spec of claim %s: no GPU", s.ClaimUID)
	}
	if s.MIG != nil {
		return buildMIG(s, h)
	}
	uuids := make([]string, len(s.GPUs))
	minors := make([]int, len(s.GPUs))
	for i, g := range s.GPUs {
		uuids[i], minors[i] = g.UUID, g.Minor
	}
	// UUIDs rather than indexes: the container sees only these GPUs, and
	// CUDA and the NVIDIA runtime both take a comma-separated UUID list.
	visible := strings.Join(uuids, ",")
	edits := specs.ContainerEdits{
		Env: []string{
			EnvGPUUUID + "=" + visible,
			"CUDA_VISIBLE_DEVICES=" + visible,
			"NVIDIA_VISIBLE_DEVICES=" + visible,
		},
	}
	if !s.Unlimited {
		edits.Env = append([]string{
			contract.EnvMemoryLimit + "=" + strconv.FormatUint(s.MemoryBytes, 10),
			contract.EnvComputeShare + "=" + strconv.Itoa(s.Fraction),
			contract.EnvAccountingDir + "=" + contract.ContainerAccountingDir,
		}, edits.Env...)
		edits.Mounts = []*specs.Mount{
			{HostPath: h.ShimLibrary, ContainerPath: contract.ContainerLibraryPath, Options: []string{"ro", "nosuid", "nodev", "bind"}},
			{HostPath: h.PreloadFile, ContainerPath: contract.ContainerPreloadPath, Options: []string{"ro", "nosuid", "nodev", "bind"}},
			{HostPath: s.AccountingDir, ContainerPath: contract.ContainerAccountingDir, Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}},
			// The limits, read-only on top of the read-write directory: a
			// mount point cannot be written, replaced, renamed or unlinked
			// from inside the container (short of CAP_SYS_ADMIN, which
			// admission refuses), so the limits are the plugin's alone.
			{HostPath: filepath.Join(s.AccountingDir, contract.LimitsFile), ContainerPath: contract.ContainerLimitsPath, Options: []string{"ro", "nosuid", "nodev", "noexec", "bind"}},
		}
	}
	if state := s.GPUs[0].SimulatedState; state != "" {
		// the fake driver simulates one device: the claim's first GPU
		edits.Env = append(edits.Env, EnvSimState+"="+SimStateContainerPath)
		edits.Mounts = append(edits.Mounts, &specs.Mount{HostPath: state, ContainerPath: SimStateContainerPath, Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}})
	}
	nodes, err := h.Devices.Nodes(minors...)
	if err != nil {
		return nil, fmt.Errorf("CDI spec of claim %s: %w", s.ClaimUID, err)
	}
	edits.DeviceNodes = nodes
	return finish(s.ClaimUID, edits, h)
}

// finish adds the driver's files to a claim's edits and makes its spec.
func finish(claimUID string, edits specs.ContainerEdits, h Host) (*specs.Spec, error) {
	for _, f := range h.DriverFiles {
		edits.Mounts = append(edits.Mounts, &specs.Mount{HostPath: f.HostPath, ContainerPath: f.ContainerPath, Options: []string{"ro", "nosuid", "nodev", "bind"}})
	}
	spec := &specs.Spec{
		Kind:    Kind,
		Devices: []specs.Device{{Name: claimUID, ContainerEdits: edits}},
	}
	v, err := specs.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, fmt.Errorf("CDI spec of claim %s: %w", claimUID, err)
	}
	spec.Version = v
	return spec, nil
}

// Writer writes and removes claim specs in one CDI spec directory.
type Writer struct {
	dir   string
	cache *cdi.Cache
}

// NewWriter writes specs into dir (e.g. /var/run/cdi, which the container
// runtime reads).
func NewWriter(dir string) (*Writer, error) {
	c, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI spec dir %s: %w", dir, err)
	}
	return &Writer{dir: dir, cache: c}, nil
}

// Write validates spec and writes it atomically as the claim's spec file.
func (w *Writer) Write(claimUID string, spec *specs.Spec) error {
	if err := w.cache.WriteSpec(spec, SpecName(claimUID)); err != nil {
		return fmt.Errorf("write CDI spec of claim %s into %s: %w", claimUID, w.dir, err)
	}
	return nil
}

// Remove deletes the claim's spec; a missing spec is not an error.
func (w *Writer) Remove(claimUID string) error {
	if err := w.cache.RemoveSpec(SpecName(claimUID)); err != nil {
		return fmt.Errorf("remove CDI spec of claim %s from %s: %w", claimUID, w.dir, err)
	}
	return nil
}

// Path is where the claim's spec file lives.
func (w *Writer) Path(claimUID string) string { return filepath.Join(w.dir, SpecName(claimUID)) }
