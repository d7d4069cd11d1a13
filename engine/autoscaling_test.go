package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/internal/cluster"
)

// autoscaleHCL is one 50 % package of a V100-PCIE-16GB (no other test
// publishes one), a quota of two of its slices in ns, and the workload
// "infer" with the given replicas line and autoscaling block.
func autoscaleHCL(ns, replicas, autoscaling string) string {
	return `
resource "gpuslice_package" "half" {
  name      = "` + ns + `-v100-half"
  gpu_model = "Tesla V100-PCIE-16GB"
  fraction  = 50
}
resource "gpuslice_quota" "q" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.half.name) = 2 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}
resource "gpuslice_workload" "infer" {
  namespace = gpuslice_quota.q.namespace
  name      = "infer"
  package   = gpuslice_package.half.name
  wait_for  = "none"
  ` + replicas + `
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "500m"
    memory_request = "1Gi"
  }
  ` + autoscaling + `
}
`
}

const autoscaling1to3 = `autoscaling {
    min_replicas    = 1
    max_replicas    = 3
    cpu_utilization = 70
  }`

// TestAutoscalerOwnsReplicas scales an autoscaled workload to 3 the way
// the HPA does (the scale subresource): the replica past the quota waits
// with the reason, and a second plan and apply leave the count alone.
func TestAutoscalerOwnsReplicas(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	const ns = "autoscale"
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: "hpa-node"}); err != nil {
		t.Fatal(err)
	}
	gpu := &draproof.Proof{Client: c.Client(), Node: "hpa-node", Model: "Tesla V100-PCIE-16GB"}
	if _, err := gpu.PublishGPU(ctx, 50); err != nil {
		t.Fatal(err)
	}
	s := loadStack(t, ns, autoscaleHCL(ns, "", autoscaling1to3))
	p := mustApply(t, e, s)
	var warned []string
	for _, d := range p.Diagnostics {
		if d.Severity == diag.Warning && strings.HasPrefix(d.Attribute, "autoscaling") {
			warned = append(warned, d.Attribute+": "+d.Summary+": "+d.Detail)
		}
	}
	if len(warned) != 1 || !strings.HasPrefix(warned[0], "autoscaling.max_replicas: max_replicas exceeds the quota") || !strings.Contains(warned[0], "replicas past 2 will wait for a slice") {
		t.Errorf("plan warnings = %q, want max_replicas past the grant of 2", warned)
	}
	hpa, err := c.Client().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "infer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != "infer" || *hpa.Spec.MinReplicas != 1 || hpa.Spec.MaxReplicas != 3 ||
		len(hpa.Spec.Metrics) != 1 || *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 70 {
		t.Errorf("HPA spec = %+v", hpa.Spec)
	}

	scaleTo(t, c.Client(), ns, "infer", 3)
	st := waitStatus(t, e, s, func(st status.Status) bool {
		return st.Reason == status.GPUQuotaExhausted && st.Scheduled == 2
	})
	if st.Replicas != 3 || !strings.HasPrefix(st.Message, "1 of 3 replicas wait for a slice (the autoscaler asks for 3, max_replicas 3): ") ||
		!strings.Contains(st.Message, `raise slices["autoscale-v100-half"]`) {
		t.Errorf("status = %+v, want 1 of 3 replicas waiting on the GPU quota", st)
	}

	requireNoChanges(t, e, s)
	mustApply(t, e, s)
	if got := replicasOf(t, c.Client(), ns, "infer"); got != 3 {
		t.Fatalf("a second apply set replicas to %d, want the autoscaler's 3", got)
	}
	requireNoChanges(t, e, s)

	// Refresh (the provider's read) shows the configuration's start, not
	// the autoscaler's count, and the block as configured.
	r, err := e.ReadResource(ctx, "gpuslice_workload", ns+"/infer", s.Workloads[0])
	if err != nil {
		t.Fatal(err)
	}
	w := r.(*spec.Workload)
	if w.Replicas != 1 || w.Autoscaling == nil || w.Autoscaling.MaxReplicas != 3 || *w.Autoscaling.CPUUtilization != 70 {
		t.Errorf("read back replicas %d, autoscaling %+v", w.Replicas, w.Autoscaling)
	}
}

// TestAutoscalingTakesOverAndGivesBack turns autoscaling on for a
// workload running 2 replicas (the configuration's replicas back to its
// default of 1): the count stays 2. Turning it off gives replicas back to
// the configuration.
func TestAutoscalingTakesOverAndGivesBack(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	const ns = "autoscale-on"
	mustApply(t, e, loadStack(t, ns, autoscaleHCL(ns, "replicas = 2", "")))
	if got := replicasOf(t, c.Client(), ns, "infer"); got != 2 {
		t.Fatalf("replicas = %d, want 2", got)
	}

	on := loadStack(t, ns, autoscaleHCL(ns, "", autoscaling1to3))
	p := mustPlan(t, e, on)
	for _, ch := range p.Changes {
		for _, f := range ch.Fields {
			if f.Path == ".spec.replicas" {
				t.Errorf("plan changes %s %s: %v -> %v; the autoscaler takes the count as it is", ch.Ref, f.Path, f.Before, f.After)
			}
		}
	}
	mustApply(t, e, on)
	if got := replicasOf(t, c.Client(), ns, "infer"); got != 2 {
		t.Fatalf("turning autoscaling on set replicas to %d, want the running 2", got)
	}
	d, err := c.Client().AppsV1().Deployments(ns).Get(ctx, "infer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owners := replicasOwners(t, d.ManagedFields); strings.Contains(owners, objects.FieldManager+"/Apply") {
		t.Errorf("spec.replicas owners %s: gpuslice still applies it", owners)
	}
	requireNoChanges(t, e, on)

	off := loadStack(t, ns, autoscaleHCL(ns, "replicas = 1", ""))
	mustApply(t, e, off)
	if got := replicasOf(t, c.Client(), ns, "infer"); got != 1 {
		t.Fatalf("turning autoscaling off left replicas at %d, want the configured 1", got)
	}
	if _, err := c.Client().AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "infer", metav1.GetOptions{}); err == nil {
		t.Error("the HorizontalPodAutoscaler is still there after autoscaling was turned off")
	}
	requireNoChanges(t, e, off)
}

// TestAutoscalingMinimumMustFitTheQuota: min_replicas past the grant is a
// plan error naming the attribute.
func TestAutoscalingMinimumMustFitTheQuota(t *testing.T) {
	e, _ := newEngine(t)
	s := loadStack(t, "autoscale-min", autoscaleHCL("autoscale-min", "", `autoscaling {
    min_replicas    = 3
    max_replicas    = 4
    cpu_utilization = 70
  }`))
	p, err := e.Plan(context.Background(), s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, d := range p.Diagnostics {
		if d.Severity == diag.Error {
			errs = append(errs, d.Address+"."+d.Attribute+": "+d.Summary+": "+d.Detail)
		}
	}
	want := "gpuslice_workload.infer.autoscaling.min_replicas: min_replicas does not fit the quota: min_replicas = 3 needs 3 autoscale-min-v100-half slices, but the gpuslice_quota for autoscale-min grants 2"
	if len(errs) != 1 || !strings.HasPrefix(errs[0], want) {
		t.Fatalf("plan errors = %q, want %q", errs, want)
	}
}

// scaleTo sets a Deployment's count through its scale subresource, as the
// HorizontalPodAutoscaler controller does.
func scaleTo(t *testing.T, client kubernetes.Interface, ns, name string, n int32) {
	t.Helper()
	_, err := client.AppsV1().Deployments(ns).UpdateScale(context.Background(), name,
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: n}},
		metav1.UpdateOptions{FieldManager: "horizontal-pod-autoscaler-test"})
	if err != nil {
		t.Fatal(err)
	}
}

func replicasOf(t *testing.T, client kubernetes.Interface, ns, name string) int32 {
	t.Helper()
	d, err := client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// replicasOwners lists manager/operation pairs that own spec.replicas.
func replicasOwners(t *testing.T, mfs []metav1.ManagedFieldsEntry) string {
	t.Helper()
	var out []string
	for _, mf := range mfs {
		set := &fieldpath.Set{}
		if mf.FieldsV1 == nil || set.FromJSON(mf.FieldsV1.GetRawReader()) != nil {
			continue
		}
		if set.Has(fieldpath.MakePathOrDie("spec", "replicas")) {
			out = append(out, mf.Manager+"/"+string(mf.Operation))
		}
	}
	return strings.Join(out, ",")
}

// waitStatus follows the stack's only workload through the engine's own
// wait, which diagnoses it again on every change its watches see, until
// done says yes.
func waitStatus(t *testing.T, e *engine.Engine, s *spec.Stack, done func(status.Status) bool) status.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var got, last *status.Status
	_, err := e.Wait(ctx, s.Workloads, func(_ string, st status.Status) {
		last = &st
		if got == nil && done(st) {
			got = &st
			cancel()
		}
	})
	if got != nil {
		return *got
	}
	if last != nil {
		t.Fatalf("status %s (%s) %q, %d/%d scheduled: %v", last.Phase, last.Reason, last.Message, last.Scheduled, last.Replicas, err)
	}
	t.Fatalf("no status: %v", err)
	return status.Status{}
}

// TestAutoscaledReplacement: an immutable change re-creates an autoscaled
// StatefulSet with its initial count (no handover of the deleted one).
func TestAutoscaledReplacement(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	const ns = "autoscale-replace"
	volume := func(size string) string {
		return `kind = "statefulset"
  model_volume {
    size       = "` + size + `"
    mount_path = "/root/.ollama"
  }`
	}
	// Created with its initial count, which gpuslice still owns: nothing
	// scaled it yet, so apply would hand it over, were the object kept.
	mustApply(t, e, loadStack(t, ns, autoscaleHCL(ns, volume("1Gi"), autoscaling1to3)))
	sts := c.Client().AppsV1().StatefulSets(ns)
	bigger := loadStack(t, ns, autoscaleHCL(ns, volume("2Gi"), autoscaling1to3))
	p := mustPlan(t, e, bigger)
	replaced := false
	for _, ch := range p.Changes {
		replaced = replaced || (ch.Ref.Kind == "StatefulSet" && ch.Action == plan.Replace)
	}
	if !replaced {
		t.Fatalf("plan does not replace the StatefulSet:\n%s", planText(p))
	}
	mustApply(t, e, bigger)
	s, err := sts.Get(ctx, "infer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *s.Spec.Replicas != 1 || s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() != "2Gi" {
		t.Errorf("re-created StatefulSet: %d replicas, volume %s; want the initial 1 and 2Gi", *s.Spec.Replicas, s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage())
	}
	requireNoChanges(t, e, bigger)
}
