// Package toolkit checks a node's NVIDIA Container Toolkit configuration
// for the way around gpuslice's slices: with NVIDIA's runtime as the
// default runtime, a container whose image sets NVIDIA_VISIBLE_DEVICES=all
// (every CUDA base image does) gets every GPU of the node — no claim, and
// nothing the admission policies can see, because the variable comes from
// the image, not the pod. The toolkit refuses that variable from
// unprivileged containers only when told to.
package toolkit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pelletier/go-toml/v2"
)

// DefaultConfig is where the toolkit keeps its configuration on a host.
const DefaultConfig = "/etc/nvidia-container-runtime/config.toml"

// EnvKey is the toolkit setting that closes the bypass when false.
const EnvKey = "accept-nvidia-visible-devices-envvar-when-unprivileged"

// Finding is what the check found.
type Finding struct {
	// Open: unprivileged containers can pick GPUs with NVIDIA_VISIBLE_DEVICES.
	Open bool
	// Reason says why, in words for a log line and an Event.
	Reason string
}

// Check reads the toolkit's configuration at path (as the plugin sees the
// host's file). No file means no NVIDIA runtime to honour the variable.
func Check(path string) (Finding, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Finding{Reason: fmt.Sprintf("no NVIDIA Container Toolkit configuration at %s: no NVIDIA runtime reads NVIDIA_VISIBLE_DEVICES on this node", path)}, nil
	}
	if err != nil {
		return Finding{}, fmt.Errorf("read the NVIDIA Container Toolkit configuration %s: %w", path, err)
	}
	var cfg map[string]any
	if err := toml.Unmarshal(data, &cfg); err != nil {
		return Finding{}, fmt.Errorf("parse the NVIDIA Container Toolkit configuration %s: %w", path, err)
	}
	v, set := cfg[EnvKey]
	accept, isBool := v.(bool)
	switch {
	case !set:
		return Finding{Open: true, Reason: fmt.Sprintf("%s does not set %s, and the toolkit's default is true: any container whose image sets NVIDIA_VISIBLE_DEVICES gets those GPUs without a claim; set %s = false", path, EnvKey, EnvKey)}, nil
	case !isBool:
		return Finding{}, fmt.Errorf("%s: %s = %v is not a boolean", path, EnvKey, v)
	case accept:
		return Finding{Open: true, Reason: fmt.Sprintf("%s sets %s = true: any container whose image sets NVIDIA_VISIBLE_DEVICES gets those GPUs without a claim; set it to false", path, EnvKey)}, nil
	}
	return Finding{Reason: fmt.Sprintf("%s sets %s = false: unprivileged containers cannot pick GPUs with NVIDIA_VISIBLE_DEVICES", path, EnvKey)}, nil
}
