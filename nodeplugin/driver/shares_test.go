package driver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// everything is what a node offering every kind publishes.
var everything = publish.Options{Fractions: contract.DefaultFractions, AnySize: true, TimeSliced: true}

// specOf reads a prepared claim's CDI spec edits.
func specOf(t *testing.T, cfg driver.Config, uid string) specs.ContainerEdits {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cfg.CDIDir, cdispec.SpecName(uid)))
	if err != nil {
		t.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	return spec.Devices[0].ContainerEdits
}

// TestAnySizeSharesOfOneGPU: the real scheduler cuts two any-size claims
// (6 GiB and 20 %, 20 GiB and 60 %) from one GPU's any-size device, refuses
// a third that would overflow it and a partition of the GPU they hold;
// prepare gives each claim exactly what the scheduler consumed for it (the
// shim's limits, the accounting region, the claim's status) and answers
// with its share ID.
func TestAnySizeSharesOfOneGPU(t *testing.T) {
	const node = "anysize-node"
	e := newEnv(t, node)
	_, cfg := e.startPluginWith(node, 1, everything)
	e.waitSlices(node, 7+2)
	quarter := e.class(25)
	classes := map[string]string{"a": e.anySizeClass("6Gi", 20), "b": e.anySizeClass("20Gi", 60)}

	want := map[string][2]int64{"a": {6 << 30, 20}, "b": {20 << 30, 60}}
	claims := map[string]*resourcev1.ResourceClaim{}
	for pod, amounts := range map[string]map[string]string{"a": {"memory": "6Gi", "compute": "20"}, "b": {"memory": "20Gi", "compute": "60"}} {
		cl, _ := e.placement(pod, e.runPodCapacity(pod, classes[pod], node, amounts), true)
		r := cl.Status.Allocation.Devices.Results[0]
		mem, comp := r.ConsumedCapacity[contract.CapacityMemory], r.ConsumedCapacity[contract.CapacityCompute]
		if r.Device != "gpu-0-any-size" || r.ShareID == nil || mem.Value() != want[pod][0] || comp.Value() != want[pod][1] {
			t.Fatalf("claim of %s: device %s share %v consumed %v; want a share of gpu-0-any-size with %v", pod, r.Device, r.ShareID, r.ConsumedCapacity, want[pod])
		}
		claims[pod] = cl
	}
	if *claims["a"].Status.Allocation.Devices.Results[0].ShareID == *claims["b"].Status.Allocation.Devices.Results[0].ShareID {
		t.Fatal("two claims got one share ID")
	}
	// 26 GiB and 80 % are taken: 8 GiB and 30 % do not fit; and while a share
	// lives the GPU's counters are held, so no partition fits either.
	if _, reason := e.placement("c", e.runPodCapacity("c", e.anySizeClass("8Gi", 30), node, map[string]string{"memory": "8Gi", "compute": "30"}), false); !strings.Contains(reason, "cannot allocate all claims") {
		t.Fatalf("the overflowing claim waits for another reason: %q", reason)
	}
	if _, reason := e.placement("d", e.runPod("d", quarter, node), false); !strings.Contains(reason, "cannot allocate all claims") {
		t.Fatalf("the partition beside the shares waits for another reason: %q", reason)
	}

	k, _ := dialKubelet(t, cfg)
	for pod, cl := range claims {
		devs, err := k.PrepareDevices(e.ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		uid := string(cl.UID)
		alloc := cl.Status.Allocation.Devices.Results[0]
		if d := devs[uid]; len(d) != 1 || d[0].GetShareId() != string(*alloc.ShareID) || d[0].DeviceName != "gpu-0-any-size" {
			t.Errorf("%s: prepared devices %v, want the share %s of gpu-0-any-size", pod, d, *alloc.ShareID)
		}
		edits := specOf(t, cfg, uid)
		for _, env := range []string{contract.EnvMemoryLimit + "=" + itoa(want[pod][0]), contract.EnvComputeShare + "=" + itoa(want[pod][1])} {
			if !slices.Contains(edits.Env, env) {
				t.Errorf("%s: spec env lacks %s: %v", pod, env, edits.Env)
			}
		}
		region, err := accounting.ReadFile(filepath.Join(cfg.AccountingRoot, uid, contract.RegionFile))
		if err != nil || int64(region.MemoryLimit) != want[pod][0] || int64(region.ComputeShare) != want[pod][1] {
			t.Errorf("%s: region %+v, %v; want %v", pod, region, err, want[pod])
		}
		if st := e.sliceStatus(cl); int64(st.MemoryLimitBytes) != want[pod][0] || int64(st.ComputeSharePercent) != want[pod][1] || st.Sharing != contract.SharingAnySize {
			t.Errorf("%s: claim status %+v", pod, st)
		}
	}
	if v := fileVersion(t, cfg); v != "v3" {
		t.Errorf("checkpoint of shares written in format %q, want v3 (a v2 reader would take a share for a partition)", v)
	}
	for _, cl := range claims {
		if err := k.Unprepare(e.ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	assertNothingLeft(t, cfg.CDIDir, cfg.AccountingRoot)
	if v := fileVersion(t, cfg); v != "v1" {
		t.Errorf("empty checkpoint written in format %q, want v1 again", v)
	}
}

// TestTimeSlicedSharesOfOneGPU: a time-sliced package of two replicas gets
// two claims on one GPU's time-sliced device and no third; each is
// prepared with the GPU whole (no limits in its environment, no shim, no
// accounting region), and its status says it is not isolated.
func TestTimeSlicedSharesOfOneGPU(t *testing.T) {
	const node = "timesliced-node"
	e := newEnv(t, node)
	_, cfg := e.startPluginWith(node, 1, everything)
	e.waitSlices(node, 7+2)
	timeSliced := e.timeSlicedClass(2)
	half := map[string]string{contract.CapacityShares: itoa(contract.SharesOf(2))}
	var claims []*resourcev1.ResourceClaim
	for _, pod := range []string{"t1", "t2"} {
		cl, _ := e.placement(pod, e.runPodCapacity(pod, timeSliced, node, half), true)
		if r := cl.Status.Allocation.Devices.Results[0]; r.Device != "gpu-0-time-sliced" || r.ShareID == nil {
			t.Fatalf("%s got %s share %v; want a share of gpu-0-time-sliced", pod, r.Device, r.ShareID)
		}
		claims = append(claims, cl)
	}
	if _, reason := e.placement("t3", e.runPodCapacity("t3", timeSliced, node, half), false); !strings.Contains(reason, "cannot allocate all claims") {
		t.Fatalf("the third replica waits for another reason: %q", reason)
	}
	k, _ := dialKubelet(t, cfg)
	for _, cl := range claims {
		if _, err := k.Prepare(e.ctx, cl); err != nil {
			t.Fatal(err)
		}
		uid := string(cl.UID)
		edits := specOf(t, cfg, uid)
		for _, env := range edits.Env {
			if strings.HasPrefix(env, contract.EnvMemoryLimit) || strings.HasPrefix(env, contract.EnvComputeShare) {
				t.Errorf("time-sliced claim limited: %s", env)
			}
		}
		for _, m := range edits.Mounts {
			if m.ContainerPath == contract.ContainerLibraryPath || m.ContainerPath == contract.ContainerPreloadPath {
				t.Errorf("time-sliced claim gets the shim: %s", m.ContainerPath)
			}
		}
		if !slices.ContainsFunc(edits.Env, func(s string) bool { return strings.HasPrefix(s, "CUDA_VISIBLE_DEVICES=GPU-") }) {
			t.Errorf("time-sliced claim does not see its GPU: %v", edits.Env)
		}
		if _, err := os.Stat(filepath.Join(cfg.AccountingRoot, uid)); !os.IsNotExist(err) {
			t.Errorf("time-sliced claim has an accounting dir: %v", err)
		}
		if st := e.sliceStatus(cl); st.Sharing != contract.SharingTimeSliced || st.MemoryLimitBytes != 0 {
			t.Errorf("claim status %+v, want time-sliced without a limit", st)
		}
		c, err := e.client.ResourceV1().ResourceClaims(cl.Namespace).Get(e.ctx, cl.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if msg := c.Status.Devices[0].Conditions[0].Message; !strings.Contains(msg, "not isolated") {
			t.Errorf("claim condition says %q, not that it is not isolated", msg)
		}
	}
	for _, cl := range claims {
		if err := k.Unprepare(e.ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	assertNothingLeft(t, cfg.CDIDir, cfg.AccountingRoot)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// fileVersion is the format of the plugin's checkpoint file.
func fileVersion(t *testing.T, cfg driver.Config) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cfg.StateDir, "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	var head struct{ Version string }
	if err := json.Unmarshal(raw, &head); err != nil {
		t.Fatal(err)
	}
	return head.Version
}
