package simulate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The NVIDIA driver names the device nodes of MIG instances in two /proc
// files: /proc/devices gives the major of "nvidia-caps", and
// /proc/driver/nvidia-caps/mig-minors the minor of each GPU instance's and
// compute instance's access node ("gpu0/gi3/access 30"). A simulated node
// has no driver, so the simulation writes the same files into a directory
// of its own and the node plugin reads them there (driver.Config's
// DriverProcRoot).

// CapsMajor is the simulated "nvidia-caps" major: the kernel assigns it when
// the driver loads, as it does nvidia-uvm's (235 on the simulated node).
const CapsMajor = 236

// The driver's layout of mig-minors: 1 and 2 are the MIG config and monitor
// capabilities, then per GPU 15 GPU instances, each one access minor
// followed by those of its 8 compute instances.
const (
	migGPUInstances     = 15
	migComputeInstances = 8
	migFirstMinor       = 3
)

// MIGMinors returns the minors of the access nodes of GPU instance gi and
// its compute instance ci on the GPU with minor gpu, as the driver numbers
// them.
func MIGMinors(gpu, gi, ci int) (giMinor, ciMinor int) {
	giMinor = migFirstMinor + gpu*migGPUInstances*(1+migComputeInstances) + gi*(1+migComputeInstances)
	return giMinor, giMinor + 1 + ci
}

// WriteProcFiles writes devices and driver/nvidia-caps/mig-minors for a node
// of gpus GPUs under dir, the simulated node's /proc.
func WriteProcFiles(dir string, gpus int) error {
	var minors strings.Builder
	minors.WriteString("config 1\nmonitor 2\n")
	for g := range gpus {
		for gi := range migGPUInstances {
			giMinor, _ := MIGMinors(g, gi, 0)
			fmt.Fprintf(&minors, "gpu%d/gi%d/access %d\n", g, gi, giMinor)
			for ci := range migComputeInstances {
				_, ciMinor := MIGMinors(g, gi, ci)
				fmt.Fprintf(&minors, "gpu%d/gi%d/ci%d/access %d\n", g, gi, ci, ciMinor)
			}
		}
	}
	devices := fmt.Sprintf("Character devices:\n  1 mem\n  4 /dev/vc/0\n  5 /dev/tty\n195 nvidia-frontend\n235 nvidia-uvm\n%d nvidia-caps\n\nBlock devices:\n  7 loop\n  8 sd\n", CapsMajor)
	for path, content := range map[string]string{
		filepath.Join(dir, "devices"):                             devices,
		filepath.Join(dir, "driver", "nvidia-caps", "mig-minors"): minors.String(),
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("simulated driver: %w", err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("simulated driver: %w", err)
		}
	}
	return nil
}
