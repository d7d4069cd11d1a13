package checkpoint_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

func TestSaveLoad(t *testing.T) {
	f, err := checkpoint.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := f.Load()
	if err != nil || len(cp.Claims) != 0 || cp.BootID != "" {
		t.Fatalf("missing checkpoint loaded as %+v, %v; want an empty one", cp, err)
	}
	cp = checkpoint.New("boot-1")
	cp.Claims["uid-1"] = checkpoint.Claim{State: checkpoint.PrepareStarted, Namespace: "ns", Name: "c",
		Devices: []checkpoint.Device{{Name: "gpu-0-25pct-1", MemoryBytes: 8 << 30, Fraction: 25}}}
	cp.Claims["uid-2"] = checkpoint.Claim{State: checkpoint.PrepareCompleted, Devices: []checkpoint.Device{{Name: "gpu-0-50pct-1"}}}
	cp.Claims["uid-3"] = checkpoint.Claim{State: checkpoint.PrepareCompleted, Namespace: "ns", Name: "train", Devices: wholeGPUs(4)}
	if err := f.Save(cp); err != nil {
		t.Fatal(err)
	}
	if v := fileVersion(t, f.Path()); v != "v2" {
		t.Errorf("file written in format %q, want v2 (a claim of several whole GPUs, every device a partition)", v)
	}
	got, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	staged := checkpoint.New("boot-1")
	if err := f.Stage(staged); err != nil {
		t.Fatal(err)
	}
	if again, err := f.Load(); err != nil || len(again.Claims) != 0 {
		t.Fatalf("after Stage of an empty checkpoint: %+v, %v", again, err)
	}
	if got.BootID != "boot-1" || !reflect.DeepEqual(got.Claims["uid-1"], cp.Claims["uid-1"]) || got.Claims["uid-2"].State != checkpoint.PrepareCompleted ||
		!reflect.DeepEqual(got.Claims["uid-3"], cp.Claims["uid-3"]) {
		t.Fatalf("loaded %+v, saved %+v", got, cp)
	}
	entries, _ := os.ReadDir(filepath.Dir(f.Path()))
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".tmp" {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestCorruption: a flipped byte, a truncated file and garbage are all
// reported as ErrCorrupt, never loaded.
func TestCorruption(t *testing.T) {
	f, _ := checkpoint.Open(t.TempDir())
	cp := checkpoint.New("boot-1")
	cp.Claims["uid-1"] = checkpoint.Claim{State: checkpoint.PrepareCompleted, Devices: []checkpoint.Device{{Name: "gpu-0-25pct-1", MemoryBytes: 8 << 30}}}
	if err := f.Save(cp); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(f.Path())
	flipped := append([]byte(nil), good...)
	i := len(flipped) - 20 // inside the data, not the checksum
	flipped[i] ^= 0x01
	for name, data := range map[string][]byte{
		"flipped byte": flipped, "truncated": good[:len(good)/2], "garbage": []byte("\x00\x01not json"),
	} {
		if err := os.WriteFile(f.Path(), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Load(); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("%s: Load returned %v, want ErrCorrupt", name, err)
		}
	}
}

// TestLockExcludes: a second holder waits until the first releases.
func TestLockExcludes(t *testing.T) {
	f, _ := checkpoint.Open(t.TempDir())
	unlock, err := f.Lock()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		u2, err := f.Lock()
		if err == nil {
			u2()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("second Lock succeeded while the first was held")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("second Lock did not get the lock after release")
	}
}

func TestReadBootID(t *testing.T) {
	p := filepath.Join(t.TempDir(), "boot_id")
	os.WriteFile(p, []byte("0f6c1a2e-1111-2222-3333-444455556666\n"), 0o600)
	if id, err := checkpoint.ReadBootID(p); err != nil || id != "0f6c1a2e-1111-2222-3333-444455556666" {
		t.Errorf("ReadBootID = %q, %v", id, err)
	}
	if id, err := checkpoint.ReadBootID(checkpoint.DefaultBootIDFile); err != nil || len(id) != 36 {
		t.Errorf("the kernel's boot ID: %q, %v", id, err)
	}
}

func fileVersion(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		t.Fatal(err)
	}
	return head.Version
}

// TestReadsUnversionedFormat: a file the first releases wrote (no version;
// testdata/checkpoint-v0.json was written by that code) loads as it was
// saved, and the next save writes the current format.
func TestReadsUnversionedFormat(t *testing.T) {
	f := oldFile(t, "checkpoint-v0.json")
	want := checkpoint.New("boot-1")
	want.Claims["uid-1"] = checkpoint.Claim{
		State: checkpoint.PrepareCompleted, Namespace: "team-a", Name: "llm", PodUIDs: []string{"pod-1"},
		Devices: []checkpoint.Device{{Request: "gpu", Pool: "node-a", Name: "gpu-0-25pct-1", GPUUUID: "GPU-1", Fraction: 25, MemoryBytes: 8 << 30}},
	}
	got := loadsAs(t, f, want)
	savesAs(t, f, got, want, "v1")
}

// oldFile is a checkpoint file holding testdata/name, a format an earlier
// release wrote.
func oldFile(t *testing.T, name string) *checkpoint.File {
	t.Helper()
	old, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := checkpoint.Open(t.TempDir())
	if err := os.WriteFile(f.Path(), old, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func loadsAs(t *testing.T, f *checkpoint.File, want *checkpoint.Checkpoint) *checkpoint.Checkpoint {
	t.Helper()
	got, err := f.Load()
	if err != nil {
		t.Fatalf("Load of an old checkpoint: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
	return got
}

// savesAs checks the next save writes format version, which loads as want.
func savesAs(t *testing.T, f *checkpoint.File, got, want *checkpoint.Checkpoint, version string) {
	t.Helper()
	if err := f.Save(got); err != nil {
		t.Fatal(err)
	}
	if v := fileVersion(t, f.Path()); v != version {
		t.Errorf("saved in format %q, want %q", v, version)
	}
	if again, err := f.Load(); err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("after conversion loaded %+v, %v; want %+v", again, err, want)
	}
}

// TestUnknownVersionRefused: a file in a format newer than this package
// reads is refused with ErrUnsupportedVersion, not taken for a corrupt one
// (which the plugin would replace), and stays byte for byte as it was.
func TestUnknownVersionRefused(t *testing.T) {
	f, _ := checkpoint.Open(t.TempDir())
	for name, content := range map[string]string{
		"string version": `{"version":"v99","checksum":1,"data":{"bootID":"boot-9","claims":{},"newField":true}}`,
		"number version": `{"version":99,"payload":"anything"}`,
	} {
		if err := os.WriteFile(f.Path(), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := f.Load()
		if !errors.Is(err, checkpoint.ErrUnsupportedVersion) || errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("%s: Load returned %v, want ErrUnsupportedVersion only", name, err)
		} else if msg := err.Error(); !strings.Contains(msg, "newer gpuslice node plugin") || !strings.Contains(msg, f.Path()) {
			t.Errorf("%s: the error does not say what happened and what to do: %s", name, msg)
		}
		if after, _ := os.ReadFile(f.Path()); !bytes.Equal(after, []byte(content)) {
			t.Errorf("%s: the file changed: %s", name, after)
		}
	}
}

// TestReadsV1Format: a file in format v1 (one device per claim;
// testdata/checkpoint-v1.json was written by the v1 code) loads with each
// claim's device as a list of one, and the next save writes v1 again: a
// plugin rolled back to the release that wrote it still reads it.
func TestReadsV1Format(t *testing.T) {
	f := oldFile(t, "checkpoint-v1.json")
	want := checkpoint.New("boot-1")
	want.Claims["uid-1"] = checkpoint.Claim{
		State: checkpoint.PrepareCompleted, Namespace: "team-a", Name: "llm", PodUIDs: []string{"pod-1"},
		Devices: []checkpoint.Device{{Request: "gpu", Pool: "node-a", Name: "gpu-1-25pct-2", GPUUUID: "GPU-1", GPUIndex: 1, GPUMinor: 1, Fraction: 25, MemoryBytes: 8 << 30}},
	}
	want.Claims["uid-2"] = checkpoint.Claim{
		State: checkpoint.PrepareStarted, Namespace: "team-b", Name: "train",
		Devices: []checkpoint.Device{{Request: "gpu", Pool: "node-a", Name: "gpu-0-100pct-1", GPUUUID: "GPU-0", Fraction: 100, MemoryBytes: 32 << 30}},
	}
	got := loadsAs(t, f, want)
	if c := got.Claims["uid-1"]; c.MemoryBytes() != 8<<30 || c.Fraction() != 25 {
		t.Errorf("converted claim's limits: %d bytes, %d%%; want the v1 slice's 8 GiB and 25%%", c.MemoryBytes(), c.Fraction())
	}
	savesAs(t, f, got, want, "v1")
}

// TestOldestFormatThatHoldsIt: a checkpoint is written in the oldest
// format that can hold it, so a plugin rolled back to an earlier release
// reads it unless a claim uses what only the newer plugin offers: v1 for
// claims of one partition each, v2 once a claim holds several (whole GPUs),
// v3 once a claim holds a share of an any-size or time-sliced device, v4
// once one holds a MIG device.
// testdata/checkpoint-v2.json was written by the v2 code.
func TestOldestFormatThatHoldsIt(t *testing.T) {
	anySize := checkpoint.Device{Request: "gpu", Pool: "node-a", Name: "gpu-0-any-size", GPUUUID: "GPU-0", Fraction: 20, MemoryBytes: 6 << 30,
		Sharing: "any-size", ShareID: "share-1"}
	timeSliced := checkpoint.Device{Request: "gpu", Pool: "node-a", Name: "gpu-1-time-sliced", GPUUUID: "GPU-1", GPUIndex: 1, GPUMinor: 1,
		Sharing: "time-sliced", ShareID: "share-2", Shares: 250000}
	slice := checkpoint.Device{Request: "gpu", Pool: "node-a", Name: "gpu-0-25pct-1", GPUUUID: "GPU-0", Fraction: 25, MemoryBytes: 8 << 30}
	mig := checkpoint.Device{Request: "gpu", Pool: "node-a", Name: "gpu-2-mig-1g-5gb-3", GPUUUID: "GPU-2", GPUIndex: 2, GPUMinor: 2, MemoryBytes: 4864 << 20,
		Sharing: "mig", MIG: &checkpoint.MIGInstance{UUID: "MIG-1", Profile: "1g.5gb", Placement: 3, GPUInstance: 9, ComputeInstance: 0}}
	for _, c := range []struct {
		version string
		claims  map[string][]checkpoint.Device
	}{
		{"v1", nil},
		{"v1", map[string][]checkpoint.Device{"a": {slice}}},
		{"v2", map[string][]checkpoint.Device{"a": {slice}, "b": wholeGPUs(2)}},
		{"v3", map[string][]checkpoint.Device{"a": {slice}, "b": {anySize}}},
		{"v3", map[string][]checkpoint.Device{"b": wholeGPUs(2), "c": {timeSliced}}},
		{"v4", map[string][]checkpoint.Device{"a": {slice}, "b": {anySize}, "m": {mig}}},
	} {
		f, _ := checkpoint.Open(t.TempDir())
		cp := checkpoint.New("boot-1")
		for uid, devs := range c.claims {
			cp.Claims[uid] = checkpoint.Claim{State: checkpoint.PrepareCompleted, Namespace: "ns", Name: uid, Devices: devs}
		}
		if err := f.Save(cp); err != nil {
			t.Fatal(err)
		}
		if v := fileVersion(t, f.Path()); v != c.version {
			t.Errorf("claims %v saved in format %q, want %q", c.claims, v, c.version)
		}
		if got, err := f.Load(); err != nil || !reflect.DeepEqual(got, cp) {
			t.Errorf("claims %v: loaded %+v, %v; want %+v", c.claims, got, err, cp)
		}
	}
	f := oldFile(t, "checkpoint-v2.json")
	want := checkpoint.New("boot-1")
	want.Claims["uid-1"] = checkpoint.Claim{State: checkpoint.PrepareCompleted, Namespace: "team-b", Name: "train", PodUIDs: []string{"pod-1"}, Devices: wholeGPUs(2)}
	got := loadsAs(t, f, want)
	savesAs(t, f, got, want, "v2")
}

// TestMultiDeviceLimits: a claim of four whole GPUs has the four GPUs'
// memory as its budget and no pacing.
func TestMultiDeviceLimits(t *testing.T) {
	c := checkpoint.Claim{Devices: wholeGPUs(4)}
	if c.MemoryBytes() != 4*(32<<30) || c.Fraction() != 100 {
		t.Errorf("limits %d bytes, %d%%; want 128 GiB and 100%%", c.MemoryBytes(), c.Fraction())
	}
	if got := c.GPUUUIDs(); !reflect.DeepEqual(got, []string{"GPU-0", "GPU-1", "GPU-2", "GPU-3"}) {
		t.Errorf("GPUUUIDs = %v", got)
	}
}

func wholeGPUs(n int) []checkpoint.Device {
	var out []checkpoint.Device
	for i := range n {
		out = append(out, checkpoint.Device{Request: "gpus", Pool: "node-a", Name: fmt.Sprintf("gpu-%d-100pct-1", i),
			GPUUUID: fmt.Sprintf("GPU-%d", i), GPUIndex: i, GPUMinor: i, Fraction: 100, MemoryBytes: 32 << 30})
	}
	return out
}
