package spec_test

import (
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

func migStack(p *spec.Package) *spec.Stack {
	p.Address, p.Name = "gpuslice_package.mig", "a100-1g"
	return &spec.Stack{Name: "t", Packages: []*spec.Package{p}}
}

// A MIG package is sized by its profile: memory_bytes and memory are the
// instance's memory as the table says, compute_share its compute slices of
// the GPU's, and it is hardware-isolated.
func TestMIGPackageResolves(t *testing.T) {
	models := tables.BuiltinGPUModels()
	for _, c := range []struct {
		model, profile string
		memory         string
		bytes          int64
		share          int
	}{
		{"NVIDIA A100-SXM4-40GB", "1g.5gb", "4864Mi", 4864 << 20, 14},
		{"NVIDIA A100-SXM4-40GB", "3g.20gb", "19968Mi", 19968 << 20, 43},
		{"NVIDIA A30", "2g.12gb", "11672Mi", 11672 << 20, 50},
		{"NVIDIA H100 80GB HBM3", "7g.80gb", "81152Mi", 81152 << 20, 100},
	} {
		p := &spec.Package{GPUModel: c.model, MIGProfile: c.profile}
		s := migStack(p)
		s.Resolve(models)
		if d := spec.Validate(s, models); d.HasErrors() {
			t.Errorf("%s %s: %v", c.model, c.profile, d.Err())
		}
		if p.Kind() != contract.SharingMIG || p.Isolation() != contract.IsolationHardware || !p.Isolated() || p.Shared() {
			t.Errorf("%s %s: kind %s, isolation %s", c.model, c.profile, p.Kind(), p.Isolation())
		}
		if p.Memory != c.memory || p.MemoryBytes != c.bytes || p.ComputeShare != c.share {
			t.Errorf("%s %s resolved to memory %s (%d bytes), compute %d %%; want %s, %d, %d", c.model, c.profile, p.Memory, p.MemoryBytes, p.ComputeShare, c.memory, c.bytes, c.share)
		}
		// what Terraform keeps of an earlier plan validates again
		again := &spec.Package{GPUModel: c.model, MIGProfile: c.profile, Memory: p.Memory, ComputeShare: p.ComputeShare}
		s = migStack(again)
		s.Resolve(models)
		if d := spec.Validate(s, models); d.HasErrors() {
			t.Errorf("%s %s with its inferred memory and compute: %v", c.model, c.profile, d.Err())
		}
	}
}

// Each mistake in a MIG package is one error on the attribute to change,
// saying what to do.
func TestMIGPackageErrors(t *testing.T) {
	models := tables.BuiltinGPUModels()
	a100 := "NVIDIA A100-SXM4-40GB"
	for _, c := range []struct {
		name string
		p    spec.Package
		attr string
		want []string
	}{
		{"typo in the profile", spec.Package{GPUModel: a100, MIGProfile: "1g.5g"}, "mig_profile",
			[]string{`"1g.5g" is not a MIG profile of NVIDIA A100-SXM4-40GB (did you mean "1g.5gb"?)`, "1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"}},
		{"another model's profile", spec.Package{GPUModel: a100, MIGProfile: "1g.10gb+me"}, "mig_profile",
			[]string{`"1g.10gb+me" is not a MIG profile of NVIDIA A100-SXM4-40GB (did you mean "1g.5gb+me"?)`}},
		{"a model without MIG", spec.Package{GPUModel: "Tesla V100-PCIE-32GB", MIGProfile: "1g.5gb"}, "mig_profile",
			[]string{"Tesla V100-PCIE-32GB has no Multi-Instance GPU (MIG) profiles", "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "leave mig_profile out for a software slice"}},
		{"with a fraction", spec.Package{GPUModel: a100, MIGProfile: "1g.5gb", Fraction: 25}, "fraction",
			[]string{"mig_profile and fraction are two kinds of package", "remove fraction"}},
		{"time-sliced", spec.Package{GPUModel: a100, MIGProfile: "1g.5gb", Sharing: "time-sliced"}, "sharing",
			[]string{"isolated by the GPU itself; remove sharing"}},
		{"with replicas", spec.Package{GPUModel: a100, MIGProfile: "1g.5gb", Replicas: 7}, "replicas",
			[]string{"follow from its profile", "remove replicas"}},
		{"with another memory", spec.Package{GPUModel: a100, MIGProfile: "1g.5gb", Memory: "6Gi"}, "memory",
			[]string{"a 1g.5gb instance of NVIDIA A100-SXM4-40GB has 4864Mi", "remove memory"}},
		{"with another compute share", spec.Package{GPUModel: a100, MIGProfile: "1g.5gb", ComputeShare: 25}, "compute_share",
			[]string{"1 of the GPU's 7 compute slices (14 %)", "remove compute_share"}},
	} {
		p := c.p
		s := migStack(&p)
		s.Resolve(models)
		d := spec.Validate(s, models)
		if len(d) != 1 || !d.HasErrors() {
			t.Errorf("%s: want exactly one error, got %v", c.name, d)
			continue
		}
		msg := d.Err().Error()
		if !strings.Contains(msg, "gpuslice_package.mig."+c.attr+":") {
			t.Errorf("%s: error not on %s: %s", c.name, c.attr, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error lacks %q: %s", c.name, w, msg)
			}
		}
	}
}

// Stacks without MIG packages do not count as having one.
func TestHasPublishedKindPackages(t *testing.T) {
	frac := &spec.Package{GPUModel: "Tesla V100-PCIE-32GB", Fraction: 25}
	mig := &spec.Package{GPUModel: "NVIDIA A100-SXM4-40GB", MIGProfile: "1g.5gb"}
	if s := (&spec.Stack{Packages: []*spec.Package{frac}}); s.HasPublishedKindPackages() || s.HasSharedPackages() {
		t.Error("a fraction package is neither shared nor of a published kind")
	}
	if s := (&spec.Stack{Packages: []*spec.Package{frac, mig}}); !s.HasPublishedKindPackages() || s.HasSharedPackages() {
		t.Error("a MIG package is of a published kind and not shared (no DRAConsumableCapacity needed)")
	}
}

// A platform for a pool of GPUs in MIG mode offers no software slices: its
// plan warns on fractions, saying what happens to a GPU not in MIG mode,
// and does not fail; a platform that offers partitions has no such warning.
func TestMIGOnlyPlatformWarns(t *testing.T) {
	models := tables.BuiltinGPUModels()
	for _, c := range []struct {
		fractions []int
		anySize   bool
		warns     bool
	}{
		{nil, false, true},
		{[]int{25, 50, 100}, false, false},
		{nil, true, false},
	} {
		s := migStack(&spec.Package{GPUModel: "NVIDIA A100-SXM4-40GB", MIGProfile: "1g.5gb"})
		s.Platform = &spec.Platform{Namespace: "gpuslice-system", TenantLabel: "gpuslice.dev/tenant", Fractions: c.fractions, AnySize: &c.anySize}
		s.Platform.Address = "gpuslice_platform.main"
		s.Resolve(models)
		d := spec.Validate(s, models)
		if d.HasErrors() {
			t.Errorf("fractions %v, any_size %v: %v", c.fractions, c.anySize, d.Err())
		}
		warned := false
		for _, w := range d {
			if w.Attribute == "fractions" && strings.Contains(w.Detail, "not in MIG mode fails to start") {
				warned = true
			}
		}
		if warned != c.warns {
			t.Errorf("fractions %v, any_size %v: warned %v, want %v (%v)", c.fractions, c.anySize, warned, c.warns, d)
		}
	}
}
