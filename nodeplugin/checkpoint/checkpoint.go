// Package checkpoint records which claims the node plugin has prepared, so
// a restarted plugin can finish, roll back or recreate its work: an
// interrupted prepare (PrepareStarted) is rolled back, a completed one
// (PrepareCompleted) survives restarts, and a new boot ID tells the plugin
// the node rebooted. The file is written atomically (temporary file, fsync,
// rename, fsync of the directory) and carries a checksum, so a torn or
// damaged file is detected instead of trusted.
//
// The file format is versioned: Load reads every format up to Latest,
// converting, and refuses a format it does not know (a newer plugin's)
// without touching the file. Save writes the oldest format that can hold
// the checkpoint, so that after an upgrade a rollback to the previous
// plugin still reads it as long as no claim uses what only the newer
// plugin offers.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/internal/atomicfile"
)

// State of a claim in the checkpoint.
type State string

const (
	PrepareStarted   State = "PrepareStarted"
	PrepareCompleted State = "PrepareCompleted"
)

// Claim is what the plugin needs to undo or recreate a claim's preparation
// without the API server.
type Claim struct {
	State     State  `json:"state"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Devices are the claim's gpuslice devices on this node: one slice, or
	// several whole GPUs (a multi-GPU pod), each on a different GPU.
	Devices []Device `json:"devices"`
	// PodUIDs are the pods the claim is reserved for: their cgroups tell
	// which GPU processes belong to the claim.
	PodUIDs []string `json:"podUIDs,omitempty"`
}

// Device is one allocated device of a claim and the GPU it is on.
type Device struct {
	Request  string `json:"request"`
	Pool     string `json:"pool"`
	Name     string `json:"name"`
	GPUUUID  string `json:"gpuUUID"`
	GPUIndex int    `json:"gpuIndex"`
	GPUMinor int    `json:"gpuMinor"`
	// Fraction is the claim's compute share on the GPU in percent and
	// MemoryBytes its memory: a partition's size, or what the scheduler
	// gave an any-size share (its consumed capacity). A time-sliced share
	// has neither: it is not limited.
	Fraction    int    `json:"fraction"`
	MemoryBytes uint64 `json:"memoryBytes"`
	// Sharing is how the device shares its GPU (contract.Sharing*); empty
	// is a partition, as every format before v3 holds.
	Sharing string `json:"sharing,omitempty"`
	// ShareID tells the claims sharing one device apart (the allocation's
	// shareID); empty for a partition.
	ShareID string `json:"shareID,omitempty"`
	// Shares is a time-sliced claim's part of the device's shares.
	Shares int64 `json:"shares,omitempty"`
	// MIG is the instance of a MIG device (Sharing is contract.SharingMIG);
	// MemoryBytes is then the instance's memory, which the hardware holds.
	MIG *MIGInstance `json:"mig,omitempty"`
}

// MIGInstance is the MIG instance a claim holds: what its CDI spec names
// (the MIG UUID, and the ids that give its device nodes' minors).
type MIGInstance struct {
	UUID            string `json:"uuid"`
	Profile         string `json:"profile"`
	Placement       int    `json:"placement"`
	GPUInstance     int    `json:"gpuInstance"`
	ComputeInstance int    `json:"computeInstance"`
}

// Partition reports whether the device is a partition, allocated to one
// claim at a time: every device before any-size and time-sliced sharing.
func (d Device) Partition() bool { return d.Sharing == "" || d.Sharing == contract.SharingPartition }

// MemoryBytes is the claim's memory budget: its devices' memory together
// (the shim keeps one budget per claim).
func (c Claim) MemoryBytes() uint64 {
	var sum uint64
	for _, d := range c.Devices {
		sum += d.MemoryBytes
	}
	return sum
}

// Fraction is the claim's compute share in percent: its slice's, or 100
// for whole GPUs (a claim of several devices holds only whole GPUs).
func (c Claim) Fraction() int {
	share := 0
	for _, d := range c.Devices {
		share = max(share, d.Fraction)
	}
	return share
}

// Limited reports whether the shim holds the claim to its memory and
// compute: every claim but a time-sliced one (nothing holds it) and a MIG
// one (the hardware does).
func (c Claim) Limited() bool {
	for _, d := range c.Devices {
		if d.Sharing == contract.SharingTimeSliced || d.Sharing == contract.SharingMIG {
			return false
		}
	}
	return true
}

// GPUUUIDs lists the claim's GPUs in device order.
func (c Claim) GPUUUIDs() []string {
	out := make([]string, 0, len(c.Devices))
	for _, d := range c.Devices {
		out = append(out, d.GPUUUID)
	}
	return out
}

// Checkpoint is the plugin's whole record, as the plugin uses it; on disk it
// is one of the versioned formats (formats.go).
type Checkpoint struct {
	BootID string
	Claims map[string]Claim // by claim UID
}

// New returns an empty checkpoint for a boot.
func New(bootID string) *Checkpoint { return &Checkpoint{BootID: bootID, Claims: map[string]Claim{}} }

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt marks a checkpoint file that exists but cannot be trusted.
var ErrCorrupt = errors.New("checkpoint is corrupt")

// ErrUnsupportedVersion marks a checkpoint file in a format this package
// does not know, written by a newer node plugin.
var ErrUnsupportedVersion = errors.New("checkpoint format not supported")

// File is a checkpoint on disk with its lock file beside it.
type File struct {
	path string
}

// Name is the checkpoint's file name in its directory.
const Name = "checkpoint.json"

// Open prepares dir (created if missing) to hold the checkpoint.
func Open(dir string) (*File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create checkpoint dir: %w", err)
	}
	return &File{path: filepath.Join(dir, Name)}, nil
}

// Path is the checkpoint file's path.
func (f *File) Path() string { return f.path }

// Lock takes the checkpoint's exclusive file lock, waiting for another
// process (a second plugin instance during a rolling update) to release
// it, and returns the function that releases it.
func (f *File) Lock() (func(), error) {
	lf, err := os.OpenFile(f.path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint lock: %w", err)
	}
	for {
		err = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("lock %s: %w", lf.Name(), err)
	}
	return func() { lf.Close() }, nil // closing drops the lock
}

// Load reads the checkpoint in any format this package knows. A missing
// file is an empty checkpoint with no boot ID; a damaged one is an error
// wrapping ErrCorrupt; one in an unknown format an error wrapping
// ErrUnsupportedVersion (the file is left as it is).
func (f *File) Load() (*Checkpoint, error) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return New(""), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	// raw: a newer format may not spell its version as a string
	var head struct {
		Version json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, f.path, err)
	}
	var version string
	if head.Version != nil && json.Unmarshal(head.Version, &version) != nil {
		version = string(head.Version)
	}
	var v4 checkpointV4
	switch version {
	case "":
		var file fileV0
		var v0 checkpointV0
		if err := f.unmarshal(data, &file); err != nil {
			return nil, err
		}
		if err := f.open(file.Checksum, file.Data, &v0); err != nil {
			return nil, err
		}
		v4 = fromV3(fromV2(fromV1(fromV0(v0))))
	case "v1":
		var file fileV1
		var v1 checkpointV1
		if err := f.unmarshal(data, &file); err != nil {
			return nil, err
		}
		if err := f.open(file.Checksum, file.Data, &v1); err != nil {
			return nil, err
		}
		v4 = fromV3(fromV2(fromV1(v1)))
	case "v2":
		var file fileV2
		var v2 checkpointV2
		if err := f.unmarshal(data, &file); err != nil {
			return nil, err
		}
		if err := f.open(file.Checksum, file.Data, &v2); err != nil {
			return nil, err
		}
		v4 = fromV3(fromV2(v2))
	case contract.CheckpointV3:
		var file fileV3
		var v3 checkpointV3
		if err := f.unmarshal(data, &file); err != nil {
			return nil, err
		}
		if err := f.open(file.Checksum, file.Data, &v3); err != nil {
			return nil, err
		}
		v4 = fromV3(v3)
	case contract.CheckpointV4:
		var file fileV3
		if err := f.unmarshal(data, &file); err != nil {
			return nil, err
		}
		if err := f.open(file.Checksum, file.Data, &v4); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: %s is in format %q, and this node plugin reads formats up to %q: it was written by a "+
			"newer gpuslice node plugin; run that version (or a newer one) again, or, once no pod on this node uses a GPU "+
			"slice, move the file away so that this version starts with an empty checkpoint",
			ErrUnsupportedVersion, f.path, version, Latest)
	}
	return fromV4(v4), nil
}

func (f *File) unmarshal(data []byte, out any) error {
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, f.path, err)
	}
	return nil
}

// open checks payload against its checksum and unmarshals it into out.
func (f *File) open(checksum uint32, payload json.RawMessage, out any) error {
	if sum := crc32.Checksum(payload, crcTable); sum != checksum {
		return fmt.Errorf("%w: %s: checksum %08x, content sums to %08x", ErrCorrupt, f.path, checksum, sum)
	}
	return f.unmarshal(payload, out)
}

// Save writes cp atomically and durably: readers see the old or the new
// checkpoint, never a mix, even if the process dies or the node loses
// power, and the new one survives a power loss once Save returns.
func (f *File) Save(cp *Checkpoint) error { return f.write(cp, true) }

// Stage writes cp atomically but leaves flushing it to the kernel: it
// survives the process dying, and after a power loss the node holds the
// previous checkpoint or this one. The plugin stages PrepareStarted: a lost
// record only leaves files the next start removes as unknown (and the
// kubelet prepares again after a reboot), so it need not wait for the disk.
func (f *File) Stage(cp *Checkpoint) error { return f.write(cp, false) }

func (f *File) write(cp *Checkpoint, durable bool) error {
	version, payload := encode(cp)
	data, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	// v1 to v4 share the envelope; only the data differs.
	out, err := json.Marshal(fileV3{Version: version, Checksum: crc32.Checksum(data, crcTable), Data: data})
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	write := atomicfile.WriteNoSync
	if durable {
		write = atomicfile.Write
	}
	if err := write(f.path, out, 0o600); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// ReadBootID reads the kernel's boot ID (/proc/sys/kernel/random/boot_id
// on Linux), which changes on every boot.
func ReadBootID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read boot ID: %w", err)
	}
	id := string(b)
	for len(id) > 0 && (id[len(id)-1] == '\n' || id[len(id)-1] == ' ') {
		id = id[:len(id)-1]
	}
	if id == "" {
		return "", fmt.Errorf("boot ID file %s is empty", path)
	}
	return id, nil
}

// DefaultBootIDFile is where Linux exposes the boot ID.
const DefaultBootIDFile = "/proc/sys/kernel/random/boot_id"
