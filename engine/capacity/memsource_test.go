package capacity_test

import (
	"context"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/capacity"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// Each GPU says where its node plugin read its memory, as the plugin's own
// publisher puts it on the devices: v2 (the total less the driver's
// reservation) or v1 (the whole total); a GPU of a plugin older than the
// attribute is unknown, not mistaken for either.
func TestGPUsSayTheirMemorySource(t *testing.T) {
	const total, reserved = 32 << 30, 423 << 20
	lib := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 2}, "new-node")
	lib.Devices[0].(*server.Device).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: total, Reserved: reserved}, nvml.SUCCESS
	}
	lib.Devices[1].(*server.Device).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{}, nvml.ERROR_FUNCTION_NOT_FOUND
	}
	found, err := discovery.Discover(lib)
	if err != nil {
		t.Fatal(err)
	}
	dr := publish.Build("new-node", found.GPUs, publish.Options{Fractions: contract.DefaultFractions, AnySize: true})
	objs := append(sliceObjects("new-node", dr.Pools["new-node"].Slices), gpu("old-node")...)
	snap, err := capacity.Published(context.Background(), viewOf(t, objs...))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		node   string
		index  int64
		memory int64
		source string
	}{
		{"new-node", 0, total - reserved, contract.MemorySourceNVMLv2},
		{"new-node", 1, total, contract.MemorySourceNVMLv1},
		{"old-node", 0, total, capacity.MemorySourceUnknown},
	}
	gpus := snap.GPUs()
	if len(gpus) != len(want) {
		t.Fatalf("GPUs %+v: want %d", gpus, len(want))
	}
	for i, w := range want {
		if g := gpus[i]; g.Node != w.node || g.Index != w.index || g.MemoryBytes != w.memory || g.MemorySource != w.source {
			t.Errorf("GPU %s/%d: %d bytes from %q, want %s/%d with %d bytes from %q", g.Node, g.Index, g.MemoryBytes, g.MemorySource, w.node, w.index, w.memory, w.source)
		}
	}
}
