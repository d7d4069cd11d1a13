package driver_test

import (
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

// TestUpgradeFromV1Checkpoint: a plugin upgraded over a checkpoint the
// previous release wrote (format v1, one device inline per claim) keeps the
// claim prepared and writes the checkpoint in v1 again, the oldest format
// that holds it, so a rollback to that release still reads it.
func TestUpgradeFromV1Checkpoint(t *testing.T) {
	e := newEnv(t, "upgrade-node")
	cfg, uid := preparedClaim(t, e, "upgrade-node")
	path := filepath.Join(cfg.StateDir, checkpoint.Name)
	cp, err := mustCheckpoint(t, cfg.StateDir).Load()
	if err != nil {
		t.Fatal(err)
	}
	c := cp.Claims[uid]
	d := c.Devices[0]
	// the v1 writer's JSON, field for field
	data, _ := json.Marshal(map[string]any{"bootID": cp.BootID, "claims": map[string]any{uid: map[string]any{
		"state": c.State, "namespace": c.Namespace, "name": c.Name, "request": d.Request, "pool": d.Pool, "device": d.Name,
		"gpuUUID": d.GPUUUID, "gpuIndex": d.GPUIndex, "gpuMinor": d.GPUMinor, "fraction": d.Fraction, "memoryBytes": d.MemoryBytes,
		"podUIDs": c.PodUIDs,
	}}})
	v1, _ := json.Marshal(map[string]any{"version": "v1", "checksum": crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)), "data": json.RawMessage(data)})
	if err := os.WriteFile(path, v1, 0o600); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(cfg.CDIDir) // the restart must restore the spec from the v1 record

	restart(t, e, cfg)
	assertPreparedOnly(t, cfg, uid)
	after, err := mustCheckpoint(t, cfg.StateDir).Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Claims[uid]; len(got.Devices) != 1 || got.Devices[0] != d || got.State != checkpoint.PrepareCompleted {
		t.Errorf("claim after the upgrade %+v, want its device %+v", got, d)
	}
	raw, _ := os.ReadFile(path)
	var head struct{ Version string }
	if err := json.Unmarshal(raw, &head); err != nil || head.Version != "v1" {
		t.Errorf("checkpoint rewritten in format %q (%v), want v1", head.Version, err)
	}
}
