package tables

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// MIGModel is one row of mig_profiles: the MIG profiles of one GPU model.
type MIGModel struct {
	GPUModel string `json:"gpu_model"`
	// ComputeSlices is the GPU's compute slices in MIG mode: 7 on A100 and
	// H100, 4 on A30.
	ComputeSlices int          `json:"compute_slices"`
	Profiles      []MIGProfile `json:"profiles"`
}

// MIGProfile is one MIG profile: a GPU instance of that size.
type MIGProfile struct {
	// Name is NVIDIA's, e.g. "1g.5gb" or "1g.5gb+me".
	Name      string `json:"name"`
	MemoryMiB int64  `json:"memory_mib"`
	// ComputeSlices is one instance's share of the GPU's compute slices.
	ComputeSlices int `json:"compute_slices"`
	// PerGPU is how many instances of this profile alone fit one GPU.
	PerGPU int `json:"per_gpu"`
}

// migProfileName is NVIDIA's naming: compute slices, memory in GB, and an
// optional extension such as "+me" (media extensions).
var migProfileName = regexp.MustCompile(`^[1-9][0-9]*g\.[1-9][0-9]*gb(\+[a-z]+)?$`)

func (m MIGModel) check() error {
	if strings.TrimSpace(m.GPUModel) == "" {
		return fmt.Errorf("gpu_model is empty")
	}
	if m.ComputeSlices <= 0 {
		return fmt.Errorf("compute_slices must be positive (7 on A100 and H100, 4 on A30)")
	}
	if len(m.Profiles) == 0 {
		return fmt.Errorf("profiles is empty; list the model's MIG profiles, or leave the model out")
	}
	seen := map[string]bool{}
	for i, p := range m.Profiles {
		switch {
		case !migProfileName.MatchString(p.Name):
			return fmt.Errorf("profiles[%d]: name %q: write NVIDIA's profile name, e.g. \"1g.5gb\" or \"1g.5gb+me\"", i, p.Name)
		case seen[p.Name]:
			return fmt.Errorf("profiles[%d]: %s is listed twice", i, p.Name)
		case p.MemoryMiB <= 0:
			return fmt.Errorf("profiles[%d] (%s): memory_mib must be positive", i, p.Name)
		case p.ComputeSlices <= 0 || p.ComputeSlices > m.ComputeSlices:
			return fmt.Errorf("profiles[%d] (%s): compute_slices must be 1 to the GPU's %d", i, p.Name, m.ComputeSlices)
		case p.PerGPU <= 0 || p.PerGPU*p.ComputeSlices > m.ComputeSlices:
			return fmt.Errorf("profiles[%d] (%s): per_gpu must be 1 to %d (its instances cannot have more than the GPU's %d compute slices)",
				i, p.Name, m.ComputeSlices/p.ComputeSlices, m.ComputeSlices)
		}
		seen[p.Name] = true
	}
	return nil
}

// MIGProfile finds the model's MIG profile by name.
func (m GPUModel) MIGProfile(name string) (MIGProfile, bool) {
	if m.MIG == nil {
		return MIGProfile{}, false
	}
	for _, p := range m.MIG.Profiles {
		if p.Name == name {
			return p, true
		}
	}
	return MIGProfile{}, false
}

// MIGProfileNames lists the model's MIG profiles, in the table's order;
// none when it has no MIG.
func (m GPUModel) MIGProfileNames() []string {
	if m.MIG == nil {
		return nil
	}
	names := make([]string, len(m.MIG.Profiles))
	for i, p := range m.MIG.Profiles {
		names[i] = p.Name
	}
	return names
}

// ComputePercent is a profile's share of its GPU's compute, in percent
// (rounded; at least 1).
func (m GPUModel) ComputePercent(p MIGProfile) int {
	if m.MIG == nil || m.MIG.ComputeSlices == 0 {
		return 0
	}
	return max((p.ComputeSlices*200+m.MIG.ComputeSlices)/(2*m.MIG.ComputeSlices), 1)
}

// MIGModels lists the models that have MIG profiles, sorted.
func (t GPUModels) MIGModels() []string {
	var names []string
	for n, m := range t {
		if m.MIG != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}
