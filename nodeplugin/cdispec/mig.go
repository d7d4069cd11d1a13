package cdispec

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	specs "tags.cncf.io/container-device-interface/specs-go"
)

// A MIG instance is reached through its parent GPU's /dev/nvidia<N> and two
// capability device nodes, /dev/nvidia-caps/nvidia-cap<M>: one grants the
// GPU instance, one the compute instance in it. The driver numbers them in
// /proc/driver/nvidia-caps/mig-minors ("gpu0/gi3/access 30",
// "gpu0/gi3/ci0/access 31") on the major /proc/devices names
// "nvidia-caps". The spec carries type, major and minor, so the runtime
// creates the nodes in the container even where the host has not made
// them (nvidia-smi makes them lazily; NVIDIA's own spec generator can miss
// them).

// MIG is the MIG instance a claim holds; the claim's one GPU is its parent.
type MIG struct {
	UUID            string // "MIG-…": what the container's CUDA sees
	Profile         string // e.g. "1g.5gb"
	MemoryBytes     uint64
	GPUInstance     int
	ComputeInstance int
}

// Where the driver's files are under the proc root.
const (
	procDevices   = "devices"
	procMIGMinors = "driver/nvidia-caps/mig-minors"
	capsDevDir    = "/dev/nvidia-caps"
)

// MIGNodes returns the two capability device nodes of GPU instance gi and
// compute instance ci on the GPU with minor gpuMinor, read from the
// driver's files under d.ProcDir.
func (d Devices) MIGNodes(gpuMinor, gi, ci int) ([]*specs.DeviceNode, error) {
	proc := d.ProcDir
	if proc == "" {
		proc = "/proc"
	}
	major, err := capsMajor(filepath.Join(proc, procDevices))
	if err != nil {
		return nil, err
	}
	giPath := fmt.Sprintf("gpu%d/gi%d/access", gpuMinor, gi)
	ciPath := fmt.Sprintf("gpu%d/gi%d/ci%d/access", gpuMinor, gi, ci)
	minors, err := migMinors(filepath.Join(proc, procMIGMinors), giPath, ciPath)
	if err != nil {
		return nil, err
	}
	var out []*specs.DeviceNode
	for _, p := range []string{giPath, ciPath} {
		out = append(out, &specs.DeviceNode{
			Path: fmt.Sprintf("%s/nvidia-cap%d", capsDevDir, minors[p]), Type: "c", Major: major, Minor: minors[p], Permissions: "rw",
		})
	}
	return out, nil
}

// capsMajor finds the "nvidia-caps" character device in /proc/devices.
func capsMajor(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read the nvidia-caps major: %w (is the NVIDIA driver loaded?)", err)
	}
	defer f.Close()
	char := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasSuffix(line, "devices:"):
			char = line == "Character devices:"
		case char:
			if num, name, ok := strings.Cut(line, " "); ok && strings.TrimSpace(name) == "nvidia-caps" {
				return strconv.ParseInt(num, 10, 64)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s has no nvidia-caps character device: the NVIDIA driver on this node does not expose MIG capabilities (a driver of R450 or later with MIG mode on does)", path)
}

// migMinors reads the minors of the wanted paths from the driver's
// mig-minors file.
func migMinors(path string, want ...string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the MIG device minors: %w (is MIG mode on, with a driver of R450 or later?)", err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, num, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		for _, w := range want {
			if name == w {
				minor, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%s: line %q: %w", path, sc.Text(), err)
				}
				out[w] = minor
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var errs []error
	for _, w := range want {
		if _, ok := out[w]; !ok {
			errs = append(errs, fmt.Errorf("%s lists no %s: does that MIG instance exist? (nvidia-smi mig -lgi; -lci)", path, w))
		}
	}
	return out, errors.Join(errs...)
}
