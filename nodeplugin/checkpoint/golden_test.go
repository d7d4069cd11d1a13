package checkpoint_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

// The v3 and v4 checkpoints below are testdata/checkpoint-v3.json and
// testdata/checkpoint-v4.json, which the code that introduced those
// formats wrote; they are never written again, so a change to the live
// types that would change what an older plugin reads shows here.

// goldenV3 holds a claim of each kind format v3 added (a share of an
// any-size device, a share of a time-sliced one) beside a partition and a
// claim of two whole GPUs.
func goldenV3() *checkpoint.Checkpoint {
	cp := checkpoint.New("boot-3")
	cp.Claims["uid-any"] = checkpoint.Claim{State: checkpoint.PrepareCompleted, Namespace: "team-a", Name: "infer", PodUIDs: []string{"pod-a"},
		Devices: []checkpoint.Device{{Request: "gpu", Pool: "node-a", Name: "gpu-0-any-size", GPUUUID: "GPU-0", Fraction: 20, MemoryBytes: 6 << 30,
			Sharing: "any-size", ShareID: "share-1"}}}
	cp.Claims["uid-ts"] = checkpoint.Claim{State: checkpoint.PrepareStarted, Namespace: "team-b", Name: "notebook",
		Devices: []checkpoint.Device{{Request: "gpu", Pool: "node-a", Name: "gpu-1-time-sliced", GPUUUID: "GPU-1", GPUIndex: 1, GPUMinor: 1,
			Sharing: "time-sliced", ShareID: "share-2", Shares: 250000}}}
	cp.Claims["uid-part"] = checkpoint.Claim{State: checkpoint.PrepareCompleted, Namespace: "team-a", Name: "llm", PodUIDs: []string{"pod-b", "pod-c"},
		Devices: []checkpoint.Device{{Request: "gpu", Pool: "node-a", Name: "gpu-2-25pct-1", GPUUUID: "GPU-2", GPUIndex: 2, GPUMinor: 2, Fraction: 25, MemoryBytes: 8 << 30}}}
	cp.Claims["uid-whole"] = checkpoint.Claim{State: checkpoint.PrepareCompleted, Namespace: "team-c", Name: "train", PodUIDs: []string{"pod-d"},
		Devices: []checkpoint.Device{
			{Request: "gpus", Pool: "node-a", Name: "gpu-3-100pct-1", GPUUUID: "GPU-3", GPUIndex: 3, GPUMinor: 3, Fraction: 100, MemoryBytes: 32 << 30},
			{Request: "gpus", Pool: "node-a", Name: "gpu-4-100pct-1", GPUUUID: "GPU-4", GPUIndex: 4, GPUMinor: 4, Fraction: 100, MemoryBytes: 32 << 30},
		}}
	return cp
}

// goldenV4 holds a MIG claim, the kind format v4 added, beside a share of
// an any-size device.
func goldenV4() *checkpoint.Checkpoint {
	cp := checkpoint.New("boot-4")
	cp.Claims["uid-mig"] = checkpoint.Claim{State: checkpoint.PrepareCompleted, Namespace: "team-a", Name: "mig", PodUIDs: []string{"pod-m"},
		Devices: []checkpoint.Device{{Request: "gpu", Pool: "node-b", Name: "gpu-0-mig-1g-5gb-3", GPUUUID: "GPU-A100", MemoryBytes: 4864 << 20,
			Sharing: "mig", MIG: &checkpoint.MIGInstance{UUID: "MIG-1", Profile: "1g.5gb", Placement: 3, GPUInstance: 9, ComputeInstance: 0}}}}
	cp.Claims["uid-any"] = checkpoint.Claim{State: checkpoint.PrepareCompleted, Namespace: "team-b", Name: "infer", PodUIDs: []string{"pod-n"},
		Devices: []checkpoint.Device{{Request: "gpu", Pool: "node-b", Name: "gpu-1-any-size", GPUUUID: "GPU-1", GPUIndex: 1, GPUMinor: 1, Fraction: 30, MemoryBytes: 10 << 30,
			Sharing: "any-size", ShareID: "share-7"}}}
	return cp
}

// TestReadsV3AndV4Formats: testdata/checkpoint-v3.json and -v4.json load
// as the checkpoints written, and saving them again writes the same
// format byte for byte, so a plugin of the release that wrote them reads
// what this one writes.
func TestReadsV3AndV4Formats(t *testing.T) {
	for _, c := range []struct {
		file, version string
		want          *checkpoint.Checkpoint
	}{
		{"checkpoint-v3.json", "v3", goldenV3()},
		{"checkpoint-v4.json", "v4", goldenV4()},
	} {
		f := oldFile(t, c.file)
		got := loadsAs(t, f, c.want)
		savesAs(t, f, got, c.want, c.version)
		golden, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if saved, err := os.ReadFile(f.Path()); err != nil || !bytes.Equal(saved, golden) {
			t.Errorf("%s saved again differs from what its format's code wrote (%v):\n%s\nwant\n%s", c.file, err, saved, golden)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: loaded %+v, want %+v", c.file, got, c.want)
		}
	}
}
