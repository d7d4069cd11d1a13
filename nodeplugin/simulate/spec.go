package simulate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Spec is one group of a --simulate value: Count GPUs of one profile, in
// MIG mode with the instances MIG when it is set.
type Spec struct {
	Profile string
	Count   int
	// MIG are the MIG instances of each GPU, one profile name per
	// instance (e.g. seven "1g.5gb"), each placed at the first placement
	// free on the GPU, as `nvidia-smi mig -cgi` does. Empty: MIG mode off.
	MIG []string
}

// String is the spec as --simulate takes it, e.g. "v100-32gb:1" or
// "a100-40gb:2,mig=3g.20gb,1g.5gb*4".
func (s Spec) String() string {
	out := fmt.Sprintf("%s:%d", s.Profile, s.Count)
	for i := 0; i < len(s.MIG); {
		j := i
		for j < len(s.MIG) && s.MIG[j] == s.MIG[i] {
			j++
		}
		item := s.MIG[i]
		if j-i > 1 {
			item += "*" + strconv.Itoa(j-i)
		}
		if i == 0 {
			out += ",mig=" + item
		} else {
			out += "," + item
		}
		i = j
	}
	return out
}

const specHelp = "<profile>[:<count>][,mig=<instance>[*<n>],...], several separated by ';', e.g. v100-32gb:4 or a100-40gb:2,mig=1g.5gb*7"

// ParseSpec reads one group, "<profile>:<count>" with MIG instances after
// it, e.g. "v100-32gb:4" or "a100-40gb:2,mig=3g.20gb,2g.10gb,1g.5gb*2"; the
// count defaults to 1. MIG instances must exist for the profile's GPU and
// fit on it together.
func ParseSpec(s string) (Spec, error) {
	head, rest, _ := strings.Cut(strings.TrimSpace(s), ",")
	name, count, found := strings.Cut(head, ":")
	spec := Spec{Profile: strings.ToLower(strings.TrimSpace(name)), Count: 1}
	cfg, ok := Profiles[spec.Profile]
	if !ok {
		return spec, fmt.Errorf("--simulate %q: unknown GPU profile %q; use one of %s, e.g. v100-32gb:4", s, name, strings.Join(ProfileNames(), ", "))
	}
	if found {
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 || n > 16 {
			return spec, fmt.Errorf("--simulate %q: GPU count %q must be a number from 1 to 16", s, count)
		}
		spec.Count = n
	}
	if rest == "" {
		return spec, nil
	}
	items, ok := strings.CutPrefix(rest, "mig=")
	if !ok {
		return spec, fmt.Errorf("--simulate %q: %q: after the count only mig=<instance>,... may follow (%s)", s, rest, specHelp)
	}
	for _, item := range strings.Split(items, ",") {
		profile, times, repeated := strings.Cut(strings.TrimSpace(item), "*")
		n := 1
		if repeated {
			var err error
			if n, err = strconv.Atoi(times); err != nil || n < 1 || n > 8 {
				return spec, fmt.Errorf("--simulate %q: MIG instance %q: the repeat count after * must be a number from 1 to 8", s, item)
			}
		}
		for range n {
			spec.MIG = append(spec.MIG, profile)
		}
	}
	if len(cfg.MIGProfiles.GpuInstanceProfiles) == 0 {
		return spec, fmt.Errorf("--simulate %q: a %s has no MIG; MIG needs one of %s", s, cfg.Name, strings.Join(migCapable(), ", "))
	}
	// Placing the instances on a throwaway GPU checks the profiles and
	// that they fit.
	if _, err := enableMIG(newDevice(cfg, 0, ""), spec.MIG, ""); err != nil {
		return spec, fmt.Errorf("--simulate %q: %w", s, err)
	}
	return spec, nil
}

// ParseNode reads a whole --simulate value: one or more groups separated by
// ';', whose GPUs are indexed in order.
func ParseNode(s string) ([]Spec, error) {
	var out []Spec
	total := 0
	for _, group := range strings.Split(s, ";") {
		spec, err := ParseSpec(group)
		if err != nil {
			return nil, err
		}
		total += spec.Count
		out = append(out, spec)
	}
	if total > 16 {
		return nil, fmt.Errorf("--simulate %q: %d GPUs on one node; at most 16", s, total)
	}
	return out, nil
}

// ProfileNames lists the profiles, sorted.
func ProfileNames() []string {
	var names []string
	for n := range Profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func migCapable() []string {
	var out []string
	for _, n := range ProfileNames() {
		if len(Profiles[n].MIGProfiles.GpuInstanceProfiles) > 0 {
			out = append(out, n)
		}
	}
	return out
}
