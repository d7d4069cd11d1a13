package driver

import (
	"testing"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
)

// packagesOf reads the packages as the plugin does: from the classes the
// engine renders for them.
func packagesOf(t *testing.T, pkgs ...spec.Package) []slicePackage {
	t.Helper()
	var out []slicePackage
	for i := range pkgs {
		sp, err := packageOf(render.DeviceClass(&pkgs[i]))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sp)
	}
	return out
}

// What each kind of GPU strands: free memory no package's slice can take,
// and nothing on an idle or time-sliced GPU.
func TestStrandedMemory(t *testing.T) {
	const gib = uint64(1) << 30
	v := discovery.GPU{Name: v100, UUID: "GPU-v", MemoryBytes: 32 * gib}
	quarter := func(n int) checkpoint.Device {
		return checkpoint.Device{Name: publish.DeviceName(0, 25, n), GPUUUID: "GPU-v", Fraction: 25, MemoryBytes: 8 * gib}
	}
	anySize := func(mem uint64, compute int) checkpoint.Device {
		return checkpoint.Device{Name: "gpu-0-any-size", GPUUUID: "GPU-v", Sharing: contract.SharingAnySize, MemoryBytes: mem, Fraction: compute}
	}
	mig := func(uuid, profile string, mem uint64) discovery.MIGDevice {
		return discovery.MIGDevice{UUID: uuid, Profile: profile, MemoryBytes: mem}
	}
	a := discovery.GPU{Name: a100, UUID: "GPU-a", MemoryBytes: 40 * gib, MIGEnabled: true, MIG: []discovery.MIGDevice{
		mig("MIG-3g", "3g.20gb", 20*gib), mig("MIG-1", "1g.5gb", 5*gib), mig("MIG-2", "1g.5gb", 5*gib), mig("MIG-3", "1g.5gb", 5*gib),
	}}
	holds := func(uuid string) checkpoint.Device {
		return checkpoint.Device{GPUUUID: "GPU-a", Sharing: contract.SharingMIG, MIG: &checkpoint.MIGInstance{UUID: uuid}}
	}
	parts := publish.Options{Fractions: []int{25, 50, 100}, AnySize: true, TimeSliced: true}
	for _, tc := range []struct {
		name string
		gpu  discovery.GPU
		held []checkpoint.Device
		pkgs []spec.Package
		want uint64
	}{
		{"idle GPU, no package fits", v, nil, []spec.Package{{Name: "h", GPUModel: v100, Fraction: 50}}, 0},
		{"a quarter held, only halves packaged", v, []checkpoint.Device{quarter(1)},
			[]spec.Package{{Name: "h", GPUModel: v100, Fraction: 50}, {Name: "w", GPUModel: v100, Fraction: 100}}, 8 * gib},
		{"a quarter held, quarters packaged", v, []checkpoint.Device{quarter(1)},
			[]spec.Package{{Name: "h", GPUModel: v100, Fraction: 50}, {Name: "q", GPUModel: v100, Fraction: 25}}, 0},
		{"a tenth packaged, not published", v, []checkpoint.Device{quarter(1)},
			[]spec.Package{{Name: "h", GPUModel: v100, Fraction: 50}, {Name: "t", GPUModel: v100, Fraction: 10}}, 8 * gib},
		{"quarters of another model", v, []checkpoint.Device{quarter(1)},
			[]spec.Package{{Name: "h", GPUModel: v100, Fraction: 50}, {Name: "q", GPUModel: "Tesla T4", Fraction: 25}}, 8 * gib},
		{"every quarter held", v, []checkpoint.Device{quarter(1), quarter(2), quarter(3), quarter(4)}, nil, 0},
		{"any-size: 8 GiB left below the 12 GiB package", v, []checkpoint.Device{anySize(12*gib, 30), anySize(12*gib, 30)},
			[]spec.Package{{Name: "m", GPUModel: v100, Memory: "12Gi", ComputeShare: 30}}, 8 * gib},
		{"any-size: two 4 GiB slices fill it", v, []checkpoint.Device{anySize(12*gib, 30), anySize(12*gib, 30)},
			[]spec.Package{{Name: "m", GPUModel: v100, Memory: "12Gi", ComputeShare: 30}, {Name: "s", GPUModel: v100, Memory: "4Gi", ComputeShare: 20}}, 0},
		{"any-size: compute left for one 4 GiB slice", v, []checkpoint.Device{anySize(12*gib, 30), anySize(12*gib, 30)},
			[]spec.Package{{Name: "s", GPUModel: v100, Memory: "4Gi", ComputeShare: 30}}, 4 * gib},
		{"time-sliced claims share it all", v, []checkpoint.Device{{GPUUUID: "GPU-v", Sharing: contract.SharingTimeSliced, Shares: 500000}}, nil, 0},
		{"MIG: the free 3g instance has no package", a, []checkpoint.Device{holds("MIG-1")},
			[]spec.Package{{Name: "m", GPUModel: a100, MIGProfile: "1g.5gb"}}, 20 * gib},
		{"MIG: every free instance has a package", a, []checkpoint.Device{holds("MIG-1")},
			[]spec.Package{{Name: "m", GPUModel: a100, MIGProfile: "1g.5gb"}, {Name: "l", GPUModel: a100, MIGProfile: "3g.20gb"}}, 0},
		{"MIG: no package at all", a, []checkpoint.Device{holds("MIG-3g")}, nil, 15 * gib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stranded(tc.gpu, tc.held, packagesOf(t, tc.pkgs...), parts); got != tc.want {
				t.Errorf("stranded: %d MiB, want %d MiB", got>>20, tc.want>>20)
			}
		})
	}
}
