package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/kubeletsim"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/enforce"
	"github.com/gpuslice/gpuslice/nodeplugin/shim"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// TestPublishAllocatePrepare runs the plugin for two simulated nodes and
// walks a claim from published slice to prepared container edits: the real
// scheduler allocates from the published slices, the counters stop a fifth
// slice on a full GPU, and a kubelet stand-in prepares and unprepares the
// claim through the plugin's socket.
func TestPublishAllocatePrepare(t *testing.T) {
	n1, n2 := "pap-node-1", "pap-node-2"
	e := newEnv(t, n1, n2)
	_, cfg1 := e.startPlugin(n1, 1)
	e.startPlugin(n2, 1)
	for _, n := range []string{n1, n2} {
		sl := e.waitSlices(n, 7)
		if len(sl) != 2 {
			t.Fatalf("node %s: %d slices, want 2 (counters, devices)", n, len(sl))
		}
		for _, s := range sl {
			if s.Spec.Pool.Name != n || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" {
				t.Errorf("slice %s: pool %q owners %v; want pool %s owned by its Node", s.Name, s.Spec.Pool.Name, s.OwnerReferences, n)
			}
		}
	}
	quarter, half := e.class(25), e.class(50)

	// Four 25 % slices fill node 1's GPU, each on its own device.
	var claims []string
	seen := map[string]bool{}
	for i := 1; i <= 4; i++ {
		pod := fmt.Sprintf("q%d", i)
		claim := e.runPod(pod, quarter, n1)
		cl, _ := e.placement(pod, claim, true)
		d := allocated(cl)
		if seen[d] || !strings.HasPrefix(d, "gpu-0-25pct-") || cl.Status.Allocation.Devices.Results[0].Pool != n1 {
			t.Fatalf("claim %d got %s/%s (seen %v)", i, cl.Status.Allocation.Devices.Results[0].Pool, d, seen)
		}
		seen[d] = true
		claims = append(claims, claim)
	}
	// A 50 % slice does not fit beside them: the counters say so.
	halfClaim := e.runPod("h1", half, n1)
	if _, reason := e.placement("h1", halfClaim, false); !strings.Contains(reason, "cannot allocate all claims") {
		t.Fatalf("the 50 %% pod waits for another reason: %q", reason)
	}

	// The kubelet's part for the first claim.
	kubelet, err := kubeletsim.Dial(cfg1.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Close()
	cl, err := e.client.ResourceV1().ResourceClaims(e.ns).Get(e.ctx, claims[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := kubelet.Prepare(e.ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	uid := string(cl.UID)
	if want := []string{"gpuslice.dev/claim=" + uid}; !slices.Equal(ids[uid], want) {
		t.Fatalf("CDI devices %v, want %v", ids[uid], want)
	}
	// The claim's status tells its owner which GPU and limits it got.
	status := e.sliceStatus(cl)
	if status.MemoryLimitBytes != 8<<30 || status.ComputeSharePercent != 25 || status.CDIDevice != ids[uid][0] || !strings.HasPrefix(status.GPUUUID, "GPU-") {
		t.Errorf("claim status data %+v", status)
	}
	again, err := kubelet.Prepare(e.ctx, cl)
	if err != nil || !slices.Equal(again[uid], ids[uid]) {
		t.Fatalf("second prepare of the same claim: %v, %v; want the same answer", again, err)
	}

	// The spec on disk, as the container runtime reads it.
	data, err := os.ReadFile(filepath.Join(cfg1.CDIDir, cdispec.SpecName(uid)))
	if err != nil {
		t.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	edits := spec.Devices[0].ContainerEdits
	for _, want := range []string{"GPUSLICE_MEMORY_LIMIT=8589934592", "GPUSLICE_COMPUTE_SHARE=25", "GPUSLICE_ACCOUNTING_DIR=/run/gpuslice"} {
		if !slices.Contains(edits.Env, want) {
			t.Errorf("spec env lacks %s: %v", want, edits.Env)
		}
	}
	var shimHost string
	for _, m := range edits.Mounts {
		if m.ContainerPath == contract.ContainerLibraryPath {
			shimHost = m.HostPath
		}
	}
	if !strings.HasPrefix(filepath.Base(shimHost), "libgpuslice-") || filepath.Dir(shimHost) != cfg1.ShimDir {
		t.Errorf("shim mounted from %q, want a versioned file in %s", shimHost, cfg1.ShimDir)
	}
	region, err := accounting.ReadFile(filepath.Join(cfg1.AccountingRoot, uid, contract.RegionFile))
	if err != nil {
		t.Fatal(err)
	}
	if region.MemoryLimit != 8<<30 || region.ComputeShare != 25 {
		t.Errorf("accounting region: limit %d share %d, want 8 GiB and 25 %%", region.MemoryLimit, region.ComputeShare)
	}
	limits, err := accounting.ReadLimits(filepath.Join(cfg1.AccountingRoot, uid, contract.LimitsFile))
	if err != nil {
		t.Fatal(err)
	}
	if limits.MemoryLimit != 8<<30 || limits.ComputeShare != 25 || limits.Burst || limits.ComputeWindow != 100*time.Millisecond ||
		limits.ContextOverhead != shim.DefaultContextOverhead || limits.SamplePeriod != enforce.Period {
		t.Errorf("limits file %+v, want 8 GiB, 25 %%, no burst, the default window and context charge", limits)
	}
	var limitsMount *specs.Mount
	for _, m := range edits.Mounts {
		if m.ContainerPath == contract.ContainerLimitsPath {
			limitsMount = m
		}
	}
	if limitsMount == nil || limitsMount.HostPath != filepath.Join(cfg1.AccountingRoot, uid, contract.LimitsFile) || !slices.Contains(limitsMount.Options, "ro") {
		t.Errorf("limits file mount %+v, want the claim's file, read-only", limitsMount)
	}
	cp, err := mustCheckpoint(t, cfg1.StateDir).Load()
	if err != nil || cp.Claims[uid].State != checkpoint.PrepareCompleted {
		t.Fatalf("checkpoint: %+v, %v", cp, err)
	}

	if err := kubelet.Unprepare(e.ctx, cl); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, cfg1.CDIDir, cfg1.AccountingRoot)
	if err := kubelet.Unprepare(e.ctx, cl); err != nil {
		t.Errorf("second unprepare: %v", err)
	}
}

// sliceStatus waits for the plugin's entry in the claim's status.devices.
func (e *env) sliceStatus(cl *resourcev1.ResourceClaim) driver.SliceStatus {
	e.tb.Helper()
	var got driver.SliceStatus
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := e.client.ResourceV1().ResourceClaims(cl.Namespace).Get(ctx, cl.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range c.Status.Devices {
			if d.Driver == "gpuslice.dev" && d.Data != nil && len(d.Conditions) == 1 && d.Conditions[0].Type == driver.ConditionPrepared {
				return true, json.Unmarshal(d.Data.Raw, &got)
			}
		}
		return false, nil
	})
	if err != nil {
		e.tb.Fatalf("claim %s/%s: no device status from the plugin: %v", cl.Namespace, cl.Name, err)
	}
	return got
}

func mustCheckpoint(t *testing.T, dir string) *checkpoint.File {
	f, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// assertNothingLeft checks no spec (nor temporary spec) and no accounting
// dir remain.
func assertNothingLeft(t *testing.T, cdiDir, accountingRoot string) {
	t.Helper()
	for _, dir := range []string{cdiDir, accountingRoot} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			t.Errorf("left behind: %s", filepath.Join(dir, e.Name()))
		}
	}
}
