package spec

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// mig checks a MIG package: a profile the model has, and none of the other
// kinds' arguments. memory and compute_share may hold what was inferred
// before (Terraform keeps a computed value in the plan), never anything
// else: the profile is the instance's size.
func (v *validator) mig(p *Package, models tables.GPUModels, m tables.GPUModel, known bool) {
	a := p.Address
	if p.Fraction != 0 {
		v.errorf(a, "fraction", "Fraction of a MIG package", "mig_profile and fraction are two kinds of package: a MIG instance's size is its profile's; remove fraction, or remove mig_profile for a %d %% software slice", p.Fraction)
	}
	if p.Sharing != "" {
		v.errorf(a, "sharing", "Sharing of a MIG package", "a MIG instance is given whole to one pod, isolated by the GPU itself; remove sharing, or remove mig_profile for a %s package", p.Sharing)
	}
	if p.Replicas != 0 {
		v.errorf(a, "replicas", "Replicas of a MIG package", "a MIG package's instances per GPU follow from its profile (the instances the GPU's MIG configuration has); remove replicas")
	}
	if !known {
		return // the unknown model is reported already
	}
	if m.MIG == nil {
		v.errorf(a, "mig_profile", "GPU model without MIG", "%s has no Multi-Instance GPU (MIG) profiles in the MIG profile table; MIG needs one of %s. Use one of those models, leave mig_profile out for a software slice of this model (fraction, or memory and compute_share), or add the model's profiles to a table file",
			p.GPUModel, strings.Join(models.MIGModels(), ", "))
		return
	}
	profile, ok := m.MIGProfile(p.MIGProfile)
	if !ok {
		v.errorf(a, "mig_profile", "Unknown MIG profile", "%q is not a MIG profile of %s%s; its profiles are %s (write the name as nvidia-smi mig -lgip prints it)",
			p.MIGProfile, p.GPUModel, diag.Suggest(p.MIGProfile, m.MIGProfileNames()), strings.Join(m.MIGProfileNames(), ", "))
		return
	}
	size := resource.NewQuantity(profile.MemoryMiB<<20, resource.BinarySI)
	if q, ok := v.quantity(a, "memory", p.Memory); ok && q.Value() != profile.MemoryMiB<<20 {
		v.errorf(a, "memory", "Memory of a MIG package", "a %s instance of %s has %s, set by the GPU; remove memory (memory_bytes follows from the profile), or choose the profile of the size you need",
			p.MIGProfile, p.GPUModel, size)
	}
	if share := m.ComputePercent(profile); p.ComputeShare != 0 && p.ComputeShare != share {
		v.errorf(a, "compute_share", "Compute share of a MIG package", "a %s instance has %d of the GPU's %d compute slices (%d %%), set by the GPU; remove compute_share, or choose the profile of the size you need",
			p.MIGProfile, profile.ComputeSlices, m.MIG.ComputeSlices, share)
	}
}
