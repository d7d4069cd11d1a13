package publish_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// Every device of a GPU says where its GPU's memory was read, so that
// gpuslice_gpus can tell a total less the driver's reservation (v2) from
// one that includes it (v1): a partition, the shared devices and a MIG
// instance alike.
func TestDevicesSayTheirMemorySource(t *testing.T) {
	lib := simulate.New(simulate.Spec{Profile: "a100-40gb", Count: 3, MIG: []string{"1g.5gb"}}, "node-a")
	lib.Devices[0].(*server.Device).GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.SUCCESS }
	lib.Devices[1].(*server.Device).GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.SUCCESS }
	lib.Devices[1].(*server.Device).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED
	}
	lib.Devices[2].(*server.Device).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: 40 << 30, Reserved: 512 << 20}, nvml.SUCCESS
	}
	res := discover(t, lib)
	if len(res.GPUs) != 3 {
		t.Fatalf("discovered %+v, skipped %+v: want 3 GPUs", res.GPUs, res.Skipped)
	}
	want := []string{contract.MemorySourceNVMLv2, contract.MemorySourceNVMLv1, contract.MemorySourceNVMLv2}
	dr := publish.Build("node-a", res.GPUs, publish.Options{Fractions: []int{50}, AnySize: true, TimeSliced: true})
	seen := map[string]bool{}
	for _, s := range dr.Pools["node-a"].Slices {
		for _, d := range s.Devices {
			idx := *d.Attributes[contract.AttrIndex].IntValue
			got := d.Attributes[contract.AttrMemorySource].StringValue
			if got == nil || *got != want[idx] {
				t.Errorf("device %s of GPU %d: %s = %v, want %q", d.Name, idx, contract.AttrMemorySource, got, want[idx])
			}
			seen[*d.Attributes[contract.AttrSharing].StringValue] = true
		}
	}
	for _, sharing := range []string{contract.SharingPartition, contract.SharingAnySize, contract.SharingTimeSliced, contract.SharingMIG} {
		if !seen[sharing] {
			t.Errorf("no %s device published: the test checks every kind", sharing)
		}
	}
}
