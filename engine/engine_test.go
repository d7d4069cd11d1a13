package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
)

func TestApplyIsIdempotent(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	s := loadStack(t, "idem", stackHCL("idem", ""))
	p := mustApply(t, e, s)
	if got := p.Count(plan.Create); got != 6 {
		t.Errorf("first apply created %d objects, want 6 (device class, namespace, quota, claim template, deployment, service):\n%s", got, planText(p))
	}
	requireNoChanges(t, e, s)

	// Controllers default and annotate the objects (deployment revision,
	// replica counts, service cluster IP): still no changes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := c.Client().AppsV1().Deployments("idem").Get(ctx, "ollama", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Status.ObservedGeneration > 0 && d.Annotations["deployment.kubernetes.io/revision"] != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("deployment controller did not process the deployment")
		}
		time.Sleep(200 * time.Millisecond)
	}
	requireNoChanges(t, e, s)

	// Every object carries the ownership labels, and the inventory lists
	// exactly the rendered objects.
	refs, err := e.Inventory.Load(ctx, "idem")
	if err != nil || len(refs) != len(p.Desired) {
		t.Fatalf("inventory has %d refs (err %v), want %d", len(refs), err, len(p.Desired))
	}
	dc, err := c.Client().ResourceV1().DeviceClasses().Get(ctx, "idem-8gi", metav1.GetOptions{})
	if err != nil || dc.Labels["app.kubernetes.io/managed-by"] != "gpuslice" || dc.Labels[objects.LabelStack] != "idem" {
		t.Fatalf("device class labels: %v (err %v)", dc.Labels, err)
	}
}

func TestDriftIsShownAndRestored(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	s := loadStack(t, "drift", stackHCL("drift", ""))
	mustApply(t, e, s)

	// Edits by hand, as kubectl edit/patch would make them.
	if _, err := c.Client().ResourceV1().DeviceClasses().Patch(ctx, "drift-8gi", types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/spec/selectors/0/cel/expression","value":"device.driver == \"gpuslice.dev\""}]`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().CoreV1().ResourceQuotas("drift").Patch(ctx, "gpuslice", types.MergePatchType,
		[]byte(`{"spec":{"hard":{"requests.cpu":"100","drift-8gi.deviceclass.resource.k8s.io/devices":"9"}}}`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	// A label another tool adds is not gpuslice's business.
	if _, err := c.Client().CoreV1().ResourceQuotas("drift").Patch(ctx, "gpuslice", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}

	p := mustPlan(t, e, s)
	got := map[string]plan.Change{}
	for _, ch := range p.Changes {
		if ch.Action != plan.NoOp {
			got[ch.Ref.String()] = ch
		}
	}
	if len(got) != 2 {
		t.Fatalf("plan changes %d objects, want the device class and the quota:\n%s", len(got), planText(p))
	}
	// The schema makes selectors an atomic list: it changes whole.
	dc := got["DeviceClass drift-8gi"]
	if dc.Action != plan.Update || len(dc.Fields) != 1 || dc.Fields[0].Path != ".spec.selectors" {
		t.Errorf("device class change = %+v", dc)
	}
	q := got["ResourceQuota drift/gpuslice"]
	var paths []string
	for _, f := range q.Fields {
		paths = append(paths, f.Path+"="+f.Before.(string)+"→"+f.After.(string))
	}
	want := `.spec.hard["drift-8gi.deviceclass.resource.k8s.io/devices"]=9→2,.spec.hard["requests.cpu"]=100→8`
	if strings.Join(paths, ",") != want {
		t.Errorf("quota field changes = %s, want %s", strings.Join(paths, ","), want)
	}

	var restored []string
	if err := e.Apply(ctx, p, apply.Options{Progress: func(ev apply.Event) { restored = append(restored, ev.Restored...) }}); err != nil {
		t.Fatal(err)
	}
	if len(restored) == 0 || restored[0] != "kubectl-edit" {
		t.Errorf("apply did not report restoring kubectl-edit's changes: %v", restored)
	}
	requireNoChanges(t, e, s)
	rq, err := c.Client().CoreV1().ResourceQuotas("drift").Get(ctx, "gpuslice", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cpu := rq.Spec.Hard[corev1.ResourceRequestsCPU]; cpu.String() != "8" || rq.Labels["team"] != "a" {
		t.Errorf("after apply: requests.cpu %s (want 8), labels %v (the other tool's label must stay)", cpu.String(), rq.Labels)
	}
}

func TestPruneRemovesOnlyWhatLeftTheConfig(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	second := `
resource "gpuslice_workload" "second" {
  namespace = gpuslice_quota.q.namespace
  name      = "second"
  package   = gpuslice_package.small.name
  wait_for  = "none"
  container {
    image       = "busybox:1.36"
    cpu_request = "100m"
    memory_request = "64Mi"
  }
}
`
	mustApply(t, e, loadStack(t, "prune", stackHCL("prune", second)))
	// Something gpuslice does not own, in the same namespace.
	if _, err := c.Client().CoreV1().ConfigMaps("prune").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-ours"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	s := loadStack(t, "prune", stackHCL("prune", ""))
	p := mustPlan(t, e, s)
	var deleted []string
	for _, ch := range p.Changes {
		switch ch.Action {
		case plan.Delete:
			deleted = append(deleted, ch.Ref.String())
			if ch.Address != "gpuslice_workload.second" {
				t.Errorf("pruning %s of %s, which is still configured", ch.Ref, ch.Address)
			}
		case plan.NoOp:
		default:
			t.Errorf("unexpected %s of %s", ch.Action, ch.Ref)
		}
	}
	want := "Deployment prune/second,ResourceClaimTemplate prune/second-prune-8gi"
	if strings.Join(deleted, ",") != want {
		t.Fatalf("pruned %v, want %s", deleted, want)
	}
	if err := e.Apply(ctx, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().AppsV1().Deployments("prune").Get(ctx, "second", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment second still exists: %v", err)
	}
	for _, check := range []func() error{
		func() error {
			_, err := c.Client().AppsV1().Deployments("prune").Get(ctx, "ollama", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := c.Client().CoreV1().ConfigMaps("prune").Get(ctx, "not-ours", metav1.GetOptions{})
			return err
		},
	} {
		if err := check(); err != nil {
			t.Errorf("an object that should stay is gone: %v", err)
		}
	}
	requireNoChanges(t, e, s)

	// Destroy removes the rest, releases the tenant namespace (which stays,
	// without gpuslice's label) and the inventory.
	dp, err := e.PlanDestroy(ctx, "prune")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Destroy(ctx, dp, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	ns, err := c.Client().CoreV1().Namespaces().Get(ctx, "prune", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("tenant namespace deleted by destroy: %v", err)
	}
	if _, labelled := ns.Labels["gpuslice.dev/tenant"]; labelled {
		t.Errorf("tenant label still on the namespace after destroy: %v", ns.Labels)
	}
	if _, err := c.Client().ResourceV1().DeviceClasses().Get(ctx, "prune-8gi", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("device class survived destroy: %v", err)
	}
	if refs, _ := e.Inventory.Load(ctx, "prune"); len(refs) != 0 {
		t.Errorf("inventory survived destroy: %v", refs)
	}
}

func TestImmutableChangeReplaces(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	job := func(image string) string {
		return `
resource "gpuslice_workload" "train" {
  namespace = gpuslice_quota.q.namespace
  name      = "train"
  package   = gpuslice_package.small.name
  kind      = "job"
  wait_for  = "none"
  container {
    image          = "` + image + `"
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`
	}
	// A model no test publishes: the job's pod stays Pending instead of
	// landing on a node without a kubelet, where it could never stop
	// (TestStuckReplacementNamesItsPods covers that).
	hcl := func(image string) string {
		return strings.Replace(stackHCL("replace", job(image)), "Tesla V100-PCIE-32GB", "NVIDIA H100 80GB HBM3", 1)
	}
	mustApply(t, e, loadStack(t, "replace", hcl("pytorch/pytorch:2.4.1")))
	before, err := c.Client().BatchV1().Jobs("replace").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := loadStack(t, "replace", hcl("pytorch/pytorch:2.5.0"))
	p := mustPlan(t, e, s)
	var replaced []string
	for _, ch := range p.Changes {
		if ch.Action == plan.Replace {
			replaced = append(replaced, ch.Ref.String()+": "+ch.Reason)
		} else if ch.Action != plan.NoOp {
			t.Errorf("unexpected %s of %s", ch.Action, ch.Ref)
		}
	}
	if len(replaced) != 1 || !strings.HasPrefix(replaced[0], "Job replace/train: .spec.template of a Job cannot be changed in place") {
		t.Fatalf("replaced = %v", replaced)
	}
	if !strings.Contains(planText(p), "-/+ Job replace/train must be replaced") {
		t.Errorf("plan text lacks the -/+ line:\n%s", planText(p))
	}
	if err := e.Apply(ctx, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	after, err := c.Client().BatchV1().Jobs("replace").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID == before.UID || after.Spec.Template.Spec.Containers[0].Image != "pytorch/pytorch:2.5.0" {
		t.Errorf("job not replaced: uid %s → %s, image %s", before.UID, after.UID, after.Spec.Template.Spec.Containers[0].Image)
	}
	requireNoChanges(t, e, s)
}

// image_pull_policy reaches the container when set; unset, the API
// server's default is not a difference.
func TestImagePullPolicy(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	policy := func() corev1.PullPolicy {
		d, err := c.Client().AppsV1().Deployments("pull").Get(ctx, "ollama", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].ImagePullPolicy
	}
	never := loadStack(t, "pull", strings.Replace(stackHCL("pull", ""), `image          = "ollama/ollama:0.24.0"`,
		`image             = "ollama/ollama:0.24.0"
    image_pull_policy = "Never"`, 1))
	mustApply(t, e, never)
	if got := policy(); got != corev1.PullNever {
		t.Errorf("container pull policy %q, want Never", got)
	}
	requireNoChanges(t, e, never)

	unset := loadStack(t, "pull", stackHCL("pull", ""))
	mustApply(t, e, unset)
	if got := policy(); got != corev1.PullIfNotPresent {
		t.Errorf("container pull policy %q after unsetting it, want the API server's default IfNotPresent", got)
	}
	requireNoChanges(t, e, unset)
}
