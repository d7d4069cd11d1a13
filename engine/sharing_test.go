package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/simnode"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// sharingHCL declares any-size and time-sliced packages of a V100-PCIE-32GB
// in namespace ns, a quota granting them, and the given workloads.
func sharingHCL(ns, workloads string) string {
	return `
resource "gpuslice_package" "small" {
  name          = "` + ns + `-6gi"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "6Gi"
  compute_share = 20
}
resource "gpuslice_package" "large" {
  name          = "` + ns + `-20gi"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "20Gi"
  compute_share = 60
}
resource "gpuslice_package" "mid" {
  name      = "` + ns + `-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  memory    = "8Gi"
}
resource "gpuslice_package" "shared" {
  name      = "` + ns + `-ts"
  gpu_model = "Tesla V100-PCIE-32GB"
  sharing   = "time-sliced"
  replicas  = 2
}
resource "gpuslice_quota" "q" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.small.name) = 1, (gpuslice_package.large.name) = 1, (gpuslice_package.mid.name) = 1, (gpuslice_package.shared.name) = 2 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}
` + workloads
}

func sharedWorkloadHCL(name, pkg string, replicas int) string {
	return `
resource "gpuslice_workload" "` + name + `" {
  namespace = gpuslice_quota.q.namespace
  name      = "` + name + `"
  package   = gpuslice_package.` + pkg + `.name
  replicas  = ` + string(rune('0'+replicas)) + `
  wait_for  = "scheduled"
  timeout   = "30s"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "100m"
    memory_request = "256Mi"
  }
}
`
}

// TestAnySizeAndTimeSlicedOnTheScheduler: on a node whose plugin publishes
// its V100 as an any-size device (the plugin's own publish code), two
// any-size workloads of 6 GiB/20 % and 20 GiB/60 % are both placed on the
// one GPU, and a third of 8 GiB (25 % inferred) waits with the reason in
// its status; on a node publishing a time-sliced device, two replicas of a
// time-sliced package share its GPU, and plan and status say that is not
// isolated.
func TestAnySizeAndTimeSlicedOnTheScheduler(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	// One kind per node: other tests' pending partition pods cannot take
	// these GPUs.
	for name, o := range map[string]publish.Options{"anysize-node": {AnySize: true}, "timesliced-node": {TimeSliced: true}} {
		n, err := simnode.Start(ctx, c, name, simulate.Spec{Profile: "v100-32gb", Count: 1}, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		if _, err := simnode.Published(ctx, c.Client(), []*simnode.Node{n}, time.Now(), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	t.Cleanup(func() {
		if t.Failed() {
			logScheduling(t, c, "sharing")
		}
	})
	s := loadStack(t, "sharing", sharingHCL("sharing", sharedWorkloadHCL("small", "small", 1)+sharedWorkloadHCL("large", "large", 1)+sharedWorkloadHCL("shared", "shared", 2)))
	p := mustApply(t, e, s)
	warnings := append(warningsOf(spec.Validate(s, tables.Builtin().GPUModels)), warningsOf(p.Diagnostics)...)
	if want := "gpuslice_package.shared.sharing: Not isolated: sharing-ts's 2 slices per GPU each see and may use the whole GPU"; !contains(warnings, want) {
		t.Errorf("plan warnings lack %q:\n%s", want, strings.Join(warnings, "\n"))
	}
	// The isolated packages named are this stack's and any other test's
	// left on the shared cluster.
	const beside = "gpuslice_package.shared.sharing: Time-sliced and isolated slices of one GPU model: sharing-ts is time-sliced (not isolated) and "
	if i := slices.IndexFunc(warnings, func(w string) bool { return strings.HasPrefix(w, beside) }); i < 0 {
		t.Errorf("plan warnings lack %q:\n%s", beside, strings.Join(warnings, "\n"))
	} else {
		list, _, _ := strings.Cut(strings.TrimPrefix(warnings[i], beside), " slice Tesla V100-PCIE-32GB GPUs too")
		names := strings.Split(list, ", ")
		for _, n := range []string{"sharing-6gi", "sharing-8gi", "sharing-20gi"} {
			if !slices.Contains(names, n) {
				t.Errorf("isolated packages beside sharing-ts: %q, want %s among them", list, n)
			}
		}
		if slices.Contains(names, "sharing-ts") {
			t.Errorf("isolated packages beside sharing-ts: %q, want not sharing-ts itself", list)
		}
	}
	for _, w := range []string{"small", "large"} {
		st := pollStatus(t, e, s, "gpuslice_workload."+w, func(st status.Status) bool { return st.Reason == status.Scheduled })
		if st.Node != "anysize-node" || st.Device != "gpu-0-any-size" {
			t.Errorf("%s placed on %s/%s, want a share of anysize-node's gpu-0-any-size", w, st.Node, st.Device)
		}
	}
	shared := pollStatus(t, e, s, "gpuslice_workload.shared", func(st status.Status) bool { return st.Scheduled == 2 })
	if shared.Node != "timesliced-node" || shared.Device != "gpu-0-time-sliced" {
		t.Errorf("time-sliced replicas placed on %s/%s, want timesliced-node's gpu-0-time-sliced", shared.Node, shared.Device)
	}

	// 26 GiB and 80 % are taken: 8 GiB and 25 % do not fit.
	s = loadStack(t, "sharing", sharingHCL("sharing", sharedWorkloadHCL("small", "small", 1)+sharedWorkloadHCL("large", "large", 1)+sharedWorkloadHCL("shared", "shared", 2)+
		strings.Replace(sharedWorkloadHCL("mid", "mid", 1), `wait_for  = "scheduled"`, `wait_for  = "none"`, 1)))
	p = mustApply(t, e, s)
	if got := warningsOf(p.Diagnostics); !contains(got, "gpuslice_workload.mid.package: No free slice now: no free sharing-8gi slice in the cluster now") {
		t.Errorf("plan warnings = %q", got)
	}
	waiting := pollStatus(t, e, s, "gpuslice_workload.mid", func(st status.Status) bool { return st.Reason == status.WaitingForSlice })
	if !strings.Contains(waiting.Message, "no GPU has 8Gi of memory and 25 % of its compute free for a sharing-8gi slice") || waiting.Phase != status.Pending {
		t.Errorf("waiting mid: %s %q", waiting.Phase, waiting.Message)
	}
}

// TestSharedPackagesNeedTheirDevices: an any-size workload on a GPU model
// whose nodes publish partitions only fails at plan, saying which setting
// to turn on, instead of waiting in Pending for good.
func TestSharedPackagesNeedTheirDevices(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	n, err := simnode.Start(ctx, c, "partitions-node", simulate.Spec{Profile: "v100-sxm2-32gb", Count: 1}, publish.Options{Fractions: []int{50}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if _, err := simnode.Published(ctx, c.Client(), []*simnode.Node{n}, time.Now(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	hcl := strings.ReplaceAll(sharingHCL("partonly", sharedWorkloadHCL("small", "small", 1)), "Tesla V100-PCIE-32GB", "Tesla V100-SXM2-32GB")
	p, err := e.Plan(ctx, loadStack(t, "partonly", hcl), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "gpuslice_workload.small.package: Any-size slices not offered: gpuslice_workload.small's pods would wait in Pending for good: " +
		"the nodes with Tesla V100-SXM2-32GB GPUs publish partition devices only, no any-size device; set any_size = true on the gpuslice_platform"
	if got := errorsOf(p.Diagnostics); !contains(got, want) {
		t.Errorf("plan errors = %q\nwant %q", got, want)
	}
	if got := warningsOf(p.Diagnostics); !contains(got, "gpuslice_package.small.memory: Any-size slices not offered:") ||
		!contains(got, "gpuslice_package.shared.sharing: Time-sliced slices not offered:") {
		t.Errorf("plan warnings = %q", got)
	}
}

// TestConsumableCapacityOff: on a control plane with DRAConsumableCapacity
// off, an any-size package fails at plan naming the feature gate, and a
// fraction package plans as ever.
func TestConsumableCapacityOff(t *testing.T) {
	c := clustertest.Start(t, cluster.Options{FeatureGates: "DRAConsumableCapacity=false"})
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ctx := context.Background()
	p, err := e.Plan(ctx, loadStack(t, "gateoff", sharingHCL("gateoff", sharedWorkloadHCL("small", "small", 1))), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "gpuslice_workload.small.package: Any-size slices not offered: gpuslice_workload.small's pods would wait in Pending for good: " +
		"the API server has the DRAConsumableCapacity feature off"
	if got := errorsOf(p.Diagnostics); !contains(got, want) {
		t.Errorf("plan errors = %q\nwant %q", got, want)
	}
	p, err = e.Plan(ctx, loadStack(t, "gateoff", stackHCL("gateoff", "")), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := errorsOf(p.Diagnostics); len(got) > 0 {
		t.Errorf("a fraction stack fails at plan with the gate off: %q", got)
	}
}

// logScheduling logs what the scheduler did with namespace's pods: each
// pod's phase, node and claims, each claim's allocation and who holds it,
// and the namespace's events (FailedScheduling says why a pod waits), for
// a failure that one run on a busy machine met (CI of 2026-12-07 20:45:
// the second time-sliced replica Pending for 90 s) and runs alone do not.
func logScheduling(t *testing.T, c *cluster.Cluster, namespace string) {
	ctx := context.Background()
	client := c.Client()
	if pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			var claims []string
			for _, st := range p.Status.ResourceClaimStatuses {
				claims = append(claims, st.Name+"="+ptr.Deref(st.ResourceClaimName, ""))
			}
			t.Logf("pod %s: %s on %q, created %s, deleting %v, claims %v", p.Name, p.Status.Phase, p.Spec.NodeName, p.CreationTimestamp.Format(time.RFC3339), p.DeletionTimestamp != nil, claims)
		}
	}
	if claims, err := client.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rc := range claims.Items {
			var devices, holders []string
			if rc.Status.Allocation != nil {
				for _, d := range rc.Status.Allocation.Devices.Results {
					devices = append(devices, d.Pool+"/"+d.Device)
				}
			}
			for _, r := range rc.Status.ReservedFor {
				holders = append(holders, r.Name)
			}
			t.Logf("claim %s: devices %v, reserved for %v", rc.Name, devices, holders)
		}
	}
	if events, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ev := range events.Items {
			at := ev.LastTimestamp.Time
			if at.IsZero() {
				at = ev.EventTime.Time // the scheduler's events
			}
			t.Logf("event %s %s/%s: %s %s", at.Format(time.StampMilli), ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
}
