package cdispec

import (
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	specs "tags.cncf.io/container-device-interface/specs-go"
)

// The spec names each device node with its type and numbers, so the
// container runtime creates it in the container from the spec alone: a
// node without them makes the runtime stat the host's file, which a
// simulated node does not have ("failed to stat CDI host device").

// Devices says where the numbers of the GPU device nodes come from.
type Devices struct {
	// Dir is the host's /dev as the plugin sees it.
	Dir string
	// Simulated GPUs have no device files: their nodes get the numbers the
	// NVIDIA driver gives them on a typical host.
	Simulated bool
	// ProcDir is where the driver's /proc files are read for MIG devices'
	// numbers ("/proc"; a simulated node's files are the simulation's).
	ProcDir string
}

// simulatedNumbers are what the NVIDIA driver's device files carry on a
// host: nvidia<N> and nvidiactl on the driver's fixed major 195, the unified
// memory devices on a major the kernel assigns at load (235 on many hosts).
func simulatedNumbers(name string) (major, minor int64) {
	switch {
	case name == "nvidiactl":
		return 195, 255
	case name == "nvidia-uvm":
		return 235, 0
	case name == "nvidia-uvm-tools":
		return 235, 1
	default:
		var n int64
		fmt.Sscanf(strings.TrimPrefix(name, "nvidia"), "%d", &n)
		return 195, n
	}
}

// Nodes lists the device nodes a container on the GPUs with these minors
// needs: each GPU's own node, then the driver's shared ones once.
func (d Devices) Nodes(minors ...int) ([]*specs.DeviceNode, error) {
	var out []*specs.DeviceNode
	var names []string
	for _, m := range minors {
		names = append(names, fmt.Sprintf("nvidia%d", m))
	}
	for _, name := range append(names, "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools") {
		node := &specs.DeviceNode{Path: "/dev/" + name, Type: "c", Permissions: "rw"}
		if d.Simulated {
			node.Major, node.Minor = simulatedNumbers(name)
			out = append(out, node)
			continue
		}
		dir := d.Dir
		if dir == "" {
			dir = "/dev"
		}
		var st unix.Stat_t
		path := filepath.Join(dir, name)
		if err := unix.Stat(path, &st); err != nil {
			hint := ""
			if strings.HasPrefix(name, "nvidia-uvm") {
				hint = " (the nvidia-uvm module creates it when first used: run `nvidia-modprobe -u -c=0` on the node)"
			}
			return nil, fmt.Errorf("GPU device node %s: %w%s", path, err, hint)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR {
			return nil, fmt.Errorf("GPU device node %s is not a character device", path)
		}
		node.Major, node.Minor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		out = append(out, node)
	}
	return out, nil
}
