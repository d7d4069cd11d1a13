package metrics_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/metrics"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// Any process of a claim can write its region: a garbage one is a read
// error of that claim, and every other claim's series are as they were.
func TestGarbageRegionHurtsOnlyItsClaim(t *testing.T) {
	root := t.TempDir()
	region := func(uid string, b []byte) metrics.Claim {
		dir := filepath.Join(root, uid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, contract.RegionFile), b, 0o666); err != nil {
			t.Fatal(err)
		}
		return metrics.Claim{UID: uid, Namespace: "ns", Name: uid, AccountingDir: dir, GPUs: []metrics.ClaimGPU{{UUID: "GPU-0", MemoryLimit: 8 << 30}}}
	}
	good := accounting.Encode(8<<30, 25, false, 100*time.Millisecond, time.Now())
	binary.LittleEndian.PutUint64(good[64:], 3<<30) // used
	garbage := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(garbage[12:], 1<<31) // header size
	binary.LittleEndian.PutUint32(garbage[20:], 1<<31) // slot count
	claims := []metrics.Claim{region("bad", garbage), region("good", good)}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.ClaimCollector{Claims: func() []metrics.Claim { return claims }})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			uid := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "claim_uid" {
					uid = l.GetValue()
				}
			}
			got[mf.GetName()+"/"+uid] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	if got["gpuslice_claim_region_read_errors/bad"] != 1 || got["gpuslice_claim_region_read_errors/good"] != 0 {
		t.Errorf("read errors: %v", got)
	}
	if got["gpuslice_claim_memory_used_bytes/good"] != 3<<30 {
		t.Errorf("the good claim's used bytes: %v", got["gpuslice_claim_memory_used_bytes/good"])
	}
	for k := range got {
		if strings.HasSuffix(k, "/bad") && !strings.HasPrefix(k, "gpuslice_claim_region_read_errors") {
			t.Errorf("a series from the garbage region: %s", k)
		}
	}
}

// A paced claim reports the GPU time the shim measured (the idle-slice
// alert divides it by the share); a claim of a whole share is not
// measured, and reports no busy time rather than a false zero.
func TestBusyTimeOnlyWhereMeasured(t *testing.T) {
	root := t.TempDir()
	claim := func(uid string, share uint32) metrics.Claim {
		b := accounting.Encode(8<<30, share, false, 100*time.Millisecond, time.Now())
		binary.LittleEndian.PutUint64(b[144:], uint64(90*time.Second)) // gpu_busy_ns
		dir := filepath.Join(root, uid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, contract.RegionFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return metrics.Claim{UID: uid, Namespace: "ns", Name: uid, AccountingDir: dir, GPUs: []metrics.ClaimGPU{{UUID: "GPU-0", MemoryLimit: 8 << 30}}}
	}
	claims := []metrics.Claim{claim("paced", 25), claim("whole", 100)}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.ClaimCollector{Claims: func() []metrics.Claim { return claims }})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "gpuslice_claim_gpu_busy_seconds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "claim_uid" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if len(got) != 1 || got["paced"] != 90 {
		t.Errorf("gpuslice_claim_gpu_busy_seconds_total by claim: %v, want only paced = 90", got)
	}
}
