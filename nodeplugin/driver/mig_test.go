package driver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// mixedNode is an A100 in MIG mode with two 1g.5gb instances (GPU 0) beside
// a V100 (GPU 1).
const mixedNode = "a100-40gb:1,mig=1g.5gb*2;v100-32gb:1"

// startMIGPlugin runs a plugin for node on the simulated GPUs of spec, with
// the simulated driver's /proc files the command would write.
func (e *env) startMIGPlugin(node, spec string) driver.Config {
	e.t.Helper()
	cfg := e.migPluginConfig(node, spec)
	p, err := driver.Start(e.ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(p.Stop)
	return cfg
}

// migPluginConfig is the configuration startMIGPlugin starts a plugin with.
func (e *env) migPluginConfig(node, spec string) driver.Config {
	e.t.Helper()
	dir := filepath.Join(e.t.TempDir(), node)
	cfg := pluginConfig(e.client, node, dir, 1)
	specs, err := simulate.ParseNode(spec)
	if err != nil {
		e.t.Fatal(err)
	}
	lib, err := simulate.NewNode(specs, node)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.NVML = lib
	cfg.DriverProcRoot = filepath.Join(dir, "proc")
	if err := simulate.WriteProcFiles(cfg.DriverProcRoot, len(lib.Devices)); err != nil {
		e.t.Fatal(err)
	}
	cfg.Registerer = prometheus.NewRegistry()
	return cfg
}

// A node whose GPUs are all in MIG mode starts with no fractions and no
// shared devices, and publishes its instances only; on a node with a V100
// beside its A100 the same options stop the start, naming the V100.
func TestMIGOnlyNodeNeedsNoFractions(t *testing.T) {
	e := newEnv(t, "mig-only")
	cfg := e.migPluginConfig("mig-only", "a100-40gb:1,mig=1g.5gb*2")
	cfg.Publish = publish.Options{}
	p, err := driver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatalf("MIG-only node without fractions: %v", err)
	}
	t.Cleanup(p.Stop)
	for _, s := range e.waitSlices("mig-only", 2) {
		for _, d := range s.Spec.Devices {
			if sharing := ptr.Deref(d.Attributes[contract.AttrSharing].StringValue, ""); sharing != contract.SharingMIG {
				t.Errorf("device %s: sharing %q, want only MIG instances", d.Name, sharing)
			}
		}
	}

	mixed := e.migPluginConfig("mixed-no-fractions", mixedNode)
	mixed.Publish = publish.Options{}
	if p, err := driver.Start(e.ctx, mixed); err == nil {
		p.Stop()
		t.Fatal("a node with a V100 and no fractions started; want an error naming the V100")
	} else if !strings.Contains(err.Error(), "GPU 1 (Tesla V100-PCIE-32GB) is not in MIG mode") {
		t.Errorf("error %q: want it to name GPU 1 and say it is not in MIG mode", err)
	}
}

// migClass creates the DeviceClass of a package of the A100's MIG
// profile, as the engine renders it.
func (e *env) migClass(profile string) string {
	return e.packageClass(spec.Package{Name: e.ns + "-mig-" + strings.ReplaceAll(profile, ".", "-"), GPUModel: simulate.A100SXM440GB.Name, MIGProfile: profile})
}

// A pod on a mixed node gets a MIG instance: its CDI spec holds the parent's
// device node and the instance's two capability nodes with the driver's
// numbers and the MIG UUID, and nothing of the shim; a V100 slice beside it
// on the same node is prepared as ever. The checkpoint (format v4), the
// claim's status and the metrics say which claim holds which instance. A
// restarted plugin restores the spec, one with an unreadable checkpoint
// rebuilds it from the API server, and unprepare removes it.
func TestMIGClaimLifecycle(t *testing.T) {
	e := newEnv(t, "mig-node")
	cfg := e.startMIGPlugin("mig-node", mixedNode)
	e.waitSlices("mig-node", 2+7)
	k, _ := dialKubelet(t, cfg)

	migClaim, _ := e.placement("mig", e.runPod("mig", e.migClass("1g.5gb"), "mig-node"), true)
	v100Claim, _ := e.placement("v100", e.runPod("v100", e.class(25), "mig-node"), true)
	if _, err := k.Prepare(e.ctx, migClaim, v100Claim); err != nil {
		t.Fatal(err)
	}
	dev := allocated(migClaim)
	migUUID := deviceAttr(t, e, "mig-node", dev, contract.AttrUUID)
	parentUUID := deviceAttr(t, e, "mig-node", dev, contract.AttrParentUUID)

	cp, err := mustCheckpoint(t, cfg.StateDir).Load()
	if err != nil {
		t.Fatal(err)
	}
	entry := cp.Claims[string(migClaim.UID)]
	if len(entry.Devices) != 1 || entry.Devices[0].MIG == nil || entry.Devices[0].MIG.UUID != migUUID || entry.Devices[0].GPUUUID != parentUUID {
		t.Fatalf("checkpoint entry %+v: want the MIG instance %s of GPU %s", entry, migUUID, parentUUID)
	}
	mig := entry.Devices[0].MIG
	if v := fileVersion(t, cfg); v != "v4" {
		t.Errorf("checkpoint with a MIG claim written as %q, want v4", v)
	}
	wantSpec := func() {
		t.Helper()
		edits := readSpec(t, cfg, string(migClaim.UID)).Devices[0].ContainerEdits
		giMinor, ciMinor := simulate.MIGMinors(0, mig.GPUInstance, mig.ComputeInstance)
		var nodes []string
		for _, n := range edits.DeviceNodes {
			nodes = append(nodes, fmt.Sprintf("%s %d:%d", n.Path, n.Major, n.Minor))
		}
		want := []string{"/dev/nvidia0 195:0", "/dev/nvidiactl 195:255", "/dev/nvidia-uvm 235:0", "/dev/nvidia-uvm-tools 235:1",
			fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d %d:%d", giMinor, simulate.CapsMajor, giMinor),
			fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d %d:%d", ciMinor, simulate.CapsMajor, ciMinor)}
		if !slices.Equal(nodes, want) {
			t.Errorf("MIG claim's device nodes %v\nwant %v", nodes, want)
		}
		for _, env := range []string{"CUDA_VISIBLE_DEVICES=" + migUUID, "NVIDIA_VISIBLE_DEVICES=" + migUUID, cdispec.EnvSimMIGProfile + "=1g.5gb"} {
			if !slices.Contains(edits.Env, env) {
				t.Errorf("MIG claim's env lacks %s: %v", env, edits.Env)
			}
		}
		for _, m := range edits.Mounts {
			if m.ContainerPath == contract.ContainerPreloadPath || m.ContainerPath == contract.ContainerAccountingDir {
				t.Errorf("MIG claim mounts %s: no shim, no accounting", m.ContainerPath)
			}
		}
		if _, err := os.Stat(filepath.Join(cfg.AccountingRoot, string(migClaim.UID))); !os.IsNotExist(err) {
			t.Errorf("MIG claim has an accounting dir (%v)", err)
		}
	}
	wantSpec()
	// the V100 beside it is sliced in software, as on any node
	v100 := readSpec(t, cfg, string(v100Claim.UID)).Devices[0].ContainerEdits
	if !slices.Contains(v100.Env, contract.EnvMemoryLimit+"=8589934592") {
		t.Errorf("the V100 slice on the mixed node is not limited: %v", v100.Env)
	}

	// The claim's status names the instance.
	var status driver.SliceStatus
	err = wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cl, err := e.client.ResourceV1().ResourceClaims(e.ns).Get(ctx, migClaim.Name, metav1.GetOptions{})
		if err != nil || len(cl.Status.Devices) == 0 || cl.Status.Devices[0].Data == nil {
			return false, err
		}
		return true, json.Unmarshal(cl.Status.Devices[0].Data.Raw, &status)
	})
	if err != nil {
		t.Fatalf("no status on the MIG claim: %v", err)
	}
	if status.Sharing != contract.SharingMIG || status.MIGUUID != migUUID || status.MIGProfile != "1g.5gb" || status.GPUUUID != parentUUID || status.MemoryLimitBytes != 4864<<20 {
		t.Errorf("claim status %+v: want the 1g.5gb instance %s of %s", status, migUUID, parentUUID)
	}

	// Restart: the spec is restored, the metrics name the instance.
	os.RemoveAll(cfg.CDIDir)
	reg := restart(t, e, cfg)
	wantSpec()
	labels := map[string]string{"claim_uid": string(migClaim.UID), "mig_uuid": migUUID, "UUID": parentUUID, "profile": "1g.5gb",
		"gpu_instance": fmt.Sprint(mig.GPUInstance), "compute_instance": fmt.Sprint(mig.ComputeInstance)}
	if got := gauge(t, reg, "gpuslice_claim_mig_instance", labels); got != 1 {
		t.Errorf("gpuslice_claim_mig_instance%v = %v, want 1", labels, got)
	}
	if got := gauge(t, reg, "gpuslice_claim_region_read_errors", map[string]string{"claim_uid": string(migClaim.UID)}); got != -1 {
		t.Errorf("a MIG claim reports an accounting region read error: %v", got)
	}

	// A checkpoint this plugin cannot read is rebuilt from the API server,
	// MIG instance included.
	ckpt := filepath.Join(cfg.StateDir, checkpoint.Name)
	data, _ := os.ReadFile(ckpt)
	os.WriteFile(ckpt, bytes.Replace(data, []byte(`"version":"v4"`), []byte(`"version":"v99"`), 1), 0o600)
	os.RemoveAll(cfg.CDIDir)
	restart(t, e, cfg)
	wantSpec()

	// Unprepare after the restarts removes the spec and the entry.
	k, _ = dialKubelet(t, cfg)
	if err := k.Unprepare(e.ctx, migClaim); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.CDIDir, cdispec.SpecName(string(migClaim.UID)))); !os.IsNotExist(err) {
		t.Errorf("MIG claim's spec left after unprepare: %v", err)
	}
	cp, _ = mustCheckpoint(t, cfg.StateDir).Load()
	if _, ok := cp.Claims[string(migClaim.UID)]; ok || len(cp.Claims) != 1 {
		t.Errorf("checkpoint after unprepare holds %v, want only the V100 claim", cp.Claims)
	}
	if v := fileVersion(t, cfg); v != "v1" {
		t.Errorf("checkpoint without a MIG claim written as %q, want v1 again (a rolled back plugin reads it)", v)
	}
}

func readSpec(t *testing.T, cfg driver.Config, uid string) *specs.Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cfg.CDIDir, cdispec.SpecName(uid)))
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// deviceAttr reads a string attribute of a device node publishes.
func deviceAttr(t *testing.T, e *env, node, device, attr string) string {
	t.Helper()
	list, err := e.client.ResourceV1().ResourceSlices().List(e.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		for _, d := range s.Spec.Devices {
			if d.Name == device {
				if v := d.Attributes[resourcev1.QualifiedName(attr)].StringValue; v != nil {
					return *v
				}
			}
		}
	}
	t.Fatalf("device %s has no attribute %s", device, attr)
	return ""
}
