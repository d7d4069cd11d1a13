package spec

import (
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// Resolve fills what packages leave to gpuslice from the GPU model table:
// each slice's memory in bytes, and its memory or compute share where the
// configuration left them out. Unknown models and sizes Validate refuses
// are left as they are.
func (s *Stack) Resolve(models tables.GPUModels) {
	for _, p := range s.Packages {
		if m, ok := models[p.GPUModel]; ok {
			p.resolve(m)
		}
	}
}

func (p *Package) resolve(m tables.GPUModel) {
	gpu := m.MemoryMiB << 20
	switch p.Kind() {
	case contract.SharingMIG:
		profile, ok := m.MIGProfile(p.MIGProfile)
		if !ok {
			return
		}
		p.MemoryBytes = profile.MemoryMiB << 20
		p.ComputeShare = cmpOr(p.ComputeShare, m.ComputePercent(profile))
	case contract.SharingPartition:
		if p.Fraction > 100 {
			return
		}
		p.MemoryBytes = gpu * int64(p.Fraction) / 100
		p.ComputeShare = cmpOr(p.ComputeShare, p.Fraction)
	case contract.SharingTimeSliced:
		p.MemoryBytes = gpu
		p.ComputeShare = cmpOr(p.ComputeShare, contract.ComputeWhole)
	default:
		if p.Memory != "" {
			q, err := resource.ParseQuantity(p.Memory)
			if err != nil {
				return
			}
			p.MemoryBytes = q.Value()
		} else if p.ComputeShare > 0 && p.ComputeShare <= 100 {
			p.MemoryBytes = max(alignDown(gpu*int64(p.ComputeShare)/100, contract.MemoryStep), contract.MemoryStep)
		}
		if p.ComputeShare == 0 && p.MemoryBytes > 0 {
			p.ComputeShare = int(min(max(math.Round(float64(p.MemoryBytes)*100/float64(gpu)), 1), 100))
		}
	}
	if p.Memory == "" && p.MemoryBytes > 0 {
		p.Memory = resource.NewQuantity(p.MemoryBytes, resource.BinarySI).String()
	}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

func alignDown(v, step int64) int64 { return v / step * step }

// pkg checks a package: its name and model, and that it is exactly one
// kind (a fraction the platform offers, an any-size slice that fits the
// GPU, a time-sliced share, or a MIG profile of the model), with what it
// infers consistent with what it sets.
func (v *validator) pkg(p *Package, models tables.GPUModels, fractions []int, platform *Platform) {
	v.dnsLabel(p.Address, "name", p.Name, "package name")
	m, known := models[p.GPUModel]
	if !known {
		v.errorf(p.Address, "gpu_model", "Unknown GPU model", "%q is not in the GPU model table%s; write the name exactly as nvidia-smi prints it, or add the model to a GPU model table file", p.GPUModel, diag.Suggest(p.GPUModel, models.Names()))
	}
	gpu := m.MemoryMiB << 20
	switch p.Kind() {
	case contract.SharingMIG:
		v.mig(p, models, m, known)
	case contract.SharingPartition:
		v.partition(p, fractions, gpu, known)
	case contract.SharingTimeSliced:
		v.timeSliced(p, gpu, known, platform)
	default:
		v.anySize(p, gpu, known, platform)
	}
	if p.ExtendedResourceName != "" {
		if errs := validation.IsQualifiedName(p.ExtendedResourceName); len(errs) > 0 || !strings.Contains(p.ExtendedResourceName, "/") ||
			strings.Contains(p.ExtendedResourceName, "kubernetes.io/") || strings.HasPrefix(p.ExtendedResourceName, "nvidia.com/") {
			v.errorf(p.Address, "extended_resource_name", "Invalid extended resource name", "%q must be a domain-prefixed name outside kubernetes.io and nvidia.com, e.g. \"gpuslice.dev/%s\"", p.ExtendedResourceName, p.Name)
		}
		// The scheduler's claim for an extended resource asks for a count of
		// devices and no capacity: of an any-size or time-sliced device that
		// is the device's default (a minimal any-size slice, or every share
		// of the GPU), never the package.
		if kind := p.Kind(); kind == contract.SharingAnySize || kind == contract.SharingTimeSliced {
			v.errorf(p.Address, "extended_resource_name", "Extended resource of a shared package",
				"%s is %s package: a pod asking for it by an extended resource name gets a claim the scheduler makes with no capacity, "+
					"which takes the device's default instead of the package (%s); remove extended_resource_name, and run the pods as a gpuslice_workload of this package, "+
					"or give them a ResourceClaimTemplate of class %s with the package's capacity (as a workload's is rendered)",
				p.Name, map[string]string{contract.SharingAnySize: "an any-size", contract.SharingTimeSliced: "a time-sliced"}[kind],
				map[string]string{contract.SharingAnySize: "the smallest any-size slice instead of its memory and compute", contract.SharingTimeSliced: "all of the GPU's shares instead of one"}[kind], p.Name)
		}
	}
}

func (v *validator) partition(p *Package, fractions []int, gpu int64, known bool) {
	if !containsInt(fractions, p.Fraction) {
		v.errorf(p.Address, "fraction", "Fraction not offered", "%d %% is not a slice size the node plugins offer (%s); use one of those or add it to gpuslice_platform.fractions", p.Fraction, joinInts(fractions))
		return
	}
	if p.Replicas != 0 {
		v.errorf(p.Address, "replicas", "Replicas of a fraction", "replicas counts the slices of a time-sliced package; a %d %% package has %d per GPU by its fraction: remove replicas", p.Fraction, 100/p.Fraction)
	}
	// memory and compute_share may hold what was inferred before (Terraform
	// keeps a computed value in the plan), never anything else
	if p.ComputeShare != 0 && p.ComputeShare != p.Fraction {
		v.errorf(p.Address, "compute_share", "Compute share and fraction disagree", "a %d %% package's compute share is %d; remove compute_share, or remove fraction for an any-size package of %d %% compute", p.Fraction, p.Fraction, p.ComputeShare)
	}
	if q, ok := v.quantity(p.Address, "memory", p.Memory); ok && known && q.Value() != gpu*int64(p.Fraction)/100 {
		v.errorf(p.Address, "memory", "Memory and fraction disagree", "%d %% of a %s is %s, not %s; remove memory, or remove fraction for an any-size package",
			p.Fraction, p.GPUModel, resource.NewQuantity(gpu*int64(p.Fraction)/100, resource.BinarySI), p.Memory)
	}
}

func (v *validator) anySize(p *Package, gpu int64, known bool, platform *Platform) {
	if p.Sharing != "" {
		v.errorf(p.Address, "sharing", "Invalid sharing", "%q: use \"time-sliced\" (whole GPUs shared without isolation), or leave sharing out for isolated slices", p.Sharing)
		return
	}
	if p.Memory == "" && p.ComputeShare == 0 {
		v.errorf(p.Address, "fraction", "Package size missing", "give the slice's size: fraction (a pre-cut share such as 25), or memory and compute_share (any size, e.g. memory = \"6Gi\", compute_share = 20), or sharing = \"time-sliced\" with replicas")
		return
	}
	if p.Replicas != 0 {
		v.errorf(p.Address, "replicas", "Replicas of an isolated package", "replicas is for sharing = \"time-sliced\"; an any-size package's slices per GPU follow from its memory and compute share: remove replicas")
	}
	if platform != nil && platform.AnySize != nil && !*platform.AnySize {
		v.errorf(p.Address, "memory", "Any-size slices not offered", "%s sets any_size = false, so no node offers any-size slices and this package's pods would wait forever; set any_size = true there, or use a fraction", platform.Address)
	}
	if p.ComputeShare != 0 && (p.ComputeShare < 1 || p.ComputeShare > 100) {
		v.errorf(p.Address, "compute_share", "Invalid compute share", "%d: give a percentage from 1 to 100", p.ComputeShare)
	}
	q, ok := v.quantity(p.Address, "memory", p.Memory)
	if !ok {
		return
	}
	step := resource.NewQuantity(contract.MemoryStep, resource.BinarySI)
	switch {
	case q.Value() < contract.MemoryStep:
		v.errorf(p.Address, "memory", "Memory too small", "%s is less than one step of %s, the smallest slice", p.Memory, step)
	case q.Value()%contract.MemoryStep != 0:
		down, up := alignDown(q.Value(), contract.MemoryStep), alignDown(q.Value(), contract.MemoryStep)+contract.MemoryStep
		v.errorf(p.Address, "memory", "Memory not a whole number of steps", "%s is not a multiple of %s, the steps the scheduler gives memory in (it would round it up, and the slice would differ from the package); use %s or %s",
			p.Memory, step, resource.NewQuantity(max(down, contract.MemoryStep), resource.BinarySI), resource.NewQuantity(up, resource.BinarySI))
	case known && q.Value() > alignDown(gpu, contract.MemoryStep):
		v.errorf(p.Address, "memory", "Slice larger than the GPU", "%s is more than a %s has (%s); use a smaller slice, or another GPU model", p.Memory, p.GPUModel, resource.NewQuantity(gpu, resource.BinarySI))
	}
}

func (v *validator) timeSliced(p *Package, gpu int64, known bool, platform *Platform) {
	if p.Fraction != 0 {
		v.errorf(p.Address, "fraction", "Fraction of a time-sliced package", "a time-sliced slice is the whole GPU, shared in time: remove fraction, or remove sharing for a %d %% slice", p.Fraction)
	}
	if p.Replicas < 2 || p.Replicas > contract.MaxTimeSliceReplicas {
		v.errorf(p.Address, "replicas", "Invalid replicas", "a time-sliced package needs replicas, the slices sharing one GPU: 2 to %d (%d given)", contract.MaxTimeSliceReplicas, p.Replicas)
	}
	if platform != nil && platform.TimeSlicing != nil && !*platform.TimeSlicing {
		v.errorf(p.Address, "sharing", "Time-sliced slices not offered", "%s sets time_slicing = false, so no node offers time-sliced GPUs and this package's pods would wait forever; set time_slicing = true there", platform.Address)
	}
	// what Terraform kept of an earlier plan is the whole GPU; anything else
	// is a limit no one would enforce
	if p.ComputeShare != 0 && p.ComputeShare != contract.ComputeWhole {
		v.errorf(p.Address, "compute_share", "Compute share of a time-sliced package", "time-sliced slices are not paced (each may use the whole GPU's time); remove compute_share, or remove sharing for an any-size package")
	}
	if q, ok := v.quantity(p.Address, "memory", p.Memory); ok && known && q.Value() != gpu {
		v.errorf(p.Address, "memory", "Memory of a time-sliced package", "time-sliced slices have no memory limit (each sees the whole GPU's %s); remove memory, or remove sharing for an any-size package of %s",
			resource.NewQuantity(gpu, resource.BinarySI), p.Memory)
	}
	v.warningf(p.Address, "sharing", "Not isolated", "%s's %d slices per GPU each see and may use the whole GPU: no memory limit, no compute share; one pod can starve or crash the others. Use a fraction or any-size package where tenants must not affect each other", p.Name, p.Replicas)
}
