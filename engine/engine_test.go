package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

func TestMain(m *testing.M) {
	os.Exit(clustertest.Main(m, cluster.Options{}, func(c *cluster.Cluster) error {
		for _, n := range []string{"gpu-node-1", "gpu-node-2"} {
			if _, err := c.AddNode(context.Background(), cluster.NodeSpec{Name: n}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// stackHCL is a stack of one package, quota and workload in namespace ns;
// extra is appended.
func stackHCL(ns, extra string) string {
	return `
resource "gpuslice_package" "small" {
  name      = "` + ns + `-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_quota" "q" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.small.name) = 2 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}

resource "gpuslice_workload" "ollama" {
  namespace = gpuslice_quota.q.namespace
  name      = "ollama"
  package   = gpuslice_package.small.name
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "4Gi"
    env            = { OLLAMA_CONTEXT_LENGTH = "16384" }
    port {
      container_port = 11434
    }
  }
  expose {
    port = 11434
  }
}
` + extra
}

func loadStack(t *testing.T, stack, hcl string) *spec.Stack {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	c, diags := hclstack.Load(dir, hclstack.Options{Stack: stack, VarOptions: hclstack.VarOptions{Env: []string{}}})
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	return c.Stack
}

func newEngine(t *testing.T) (*engine.Engine, *cluster.Cluster) {
	t.Helper()
	c := clustertest.Shared(t)
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

func mustPlan(t *testing.T, e *engine.Engine, s *spec.Stack) *plan.Plan {
	t.Helper()
	p, err := e.Plan(context.Background(), s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Diagnostics.HasErrors() {
		t.Fatal(p.Diagnostics.Err())
	}
	return p
}

func mustApply(t *testing.T, e *engine.Engine, s *spec.Stack) *plan.Plan {
	t.Helper()
	p := mustPlan(t, e, s)
	if err := e.Apply(context.Background(), p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	return p
}

func planText(p *plan.Plan) string {
	var b strings.Builder
	p.WriteText(&b)
	return b.String()
}

func requireNoChanges(t *testing.T, e *engine.Engine, s *spec.Stack) {
	t.Helper()
	if p := mustPlan(t, e, s); p.HasChanges() {
		t.Fatalf("plan after apply is not empty:\n%s", planText(p))
	}
}

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
	dc := got["DeviceClass drift-8gi"]
	if dc.Action != plan.Update || len(dc.Fields) != 1 || dc.Fields[0].Path != ".spec.selectors[0].cel.expression" {
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

func TestObjectsNotOwnedAreNotTaken(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	// A device class someone made by hand, with the name a package wants.
	if _, err := c.Client().ResourceV1().DeviceClasses().Create(ctx, mustDeviceClass("owned-8gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := loadStack(t, "owned", stackHCL("owned", ""))
	p, err := e.Plan(ctx, s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Diagnostics.HasErrors() || !strings.Contains(p.Diagnostics.Err().Error(), "DeviceClass owned-8gi already exists and was not created by gpuslice") {
		t.Fatalf("plan diagnostics = %v, want an object-in-the-way error", p.Diagnostics.Err())
	}
	if err := e.Apply(ctx, p, apply.Options{}); err == nil {
		t.Fatal("apply went ahead with an object in the way")
	}
	p, err = e.Plan(ctx, s, plan.Options{Adopt: true})
	if err != nil || p.Diagnostics.HasErrors() {
		t.Fatalf("adopting plan: %v %v", err, p.Diagnostics.Err())
	}
	if err := e.Apply(ctx, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	requireNoChanges(t, e, s)

	// Another stack may not take this stack's objects.
	other := loadStack(t, "other", stackHCL("owned", ""))
	p, err = e.Plan(ctx, other, plan.Options{Adopt: true})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Diagnostics.HasErrors() || !strings.Contains(p.Diagnostics.Err().Error(), `belongs to gpuslice stack "owned"`) {
		t.Fatalf("plan of another stack = %v, want an ownership error", p.Diagnostics.Err())
	}
}

func TestConflictWithAnotherApplier(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	s := loadStack(t, "conflict", stackHCL("conflict", ""))
	mustApply(t, e, s)
	// Another declarative tool claims the quota's CPU with server-side apply.
	body := `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"gpuslice","namespace":"conflict"},"spec":{"hard":{"requests.cpu":"3"}}}`
	if _, err := c.Client().CoreV1().ResourceQuotas("conflict").Patch(ctx, "gpuslice", types.ApplyPatchType, []byte(body),
		metav1.PatchOptions{FieldManager: "argocd", Force: boolPtr(true)}); err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, e, s)
	err := e.Apply(ctx, p, apply.Options{})
	if err == nil || !strings.Contains(err.Error(), `"argocd"`) || !strings.Contains(err.Error(), "-force-conflicts") {
		t.Fatalf("apply error = %v, want a conflict naming argocd and -force-conflicts", err)
	}
	if err := e.Apply(ctx, mustPlan(t, e, s), apply.Options{ForceConflicts: true}); err != nil {
		t.Fatal(err)
	}
	requireNoChanges(t, e, s)
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
	mustApply(t, e, loadStack(t, "replace", stackHCL("replace", job("pytorch/pytorch:2.4.1"))))
	before, err := c.Client().BatchV1().Jobs("replace").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := loadStack(t, "replace", stackHCL("replace", job("pytorch/pytorch:2.5.0")))
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

// TestInterruptedApplyConverges stops the API server in the middle of an
// apply, starts it again, and applies a smaller configuration: everything
// the interrupted apply created but the configuration no longer has is
// pruned, nothing is duplicated.
func TestInterruptedApplyConverges(t *testing.T) {
	// A cluster of its own: the outage would disturb the controllers the
	// other tests rely on.
	c := clustertest.Start(t, cluster.Options{})
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	extra := ""
	for _, name := range []string{"a", "b", "c", "d"} {
		extra += `
resource "gpuslice_workload" "w` + name + `" {
  namespace = gpuslice_quota.q.namespace
  name      = "w` + name + `"
  package   = gpuslice_package.small.name
  wait_for  = "none"
  container {
    image          = "busybox:1.36"
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`
	}
	big := loadStack(t, "outage", stackHCL("outage", extra))
	p := mustPlan(t, e, big)
	applied := 0
	err = e.Apply(ctx, p, apply.Options{Concurrency: 1, Progress: func(ev apply.Event) {
		if ev.Err == nil {
			applied++
		}
		if applied == 5 && ev.Err == nil {
			c.StopAPIServer()
		}
	}})
	if err == nil {
		t.Fatal("apply succeeded although the API server was stopped half-way")
	}
	t.Logf("interrupted after %d objects: %v", applied, firstLine(err))
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}

	small := loadStack(t, "outage", stackHCL("outage", ""))
	final := mustApply(t, e, small)
	requireNoChanges(t, e, small)

	// No orphans: every object labelled with the stack is one the
	// configuration renders, and the inventory lists exactly those.
	want := map[string]bool{}
	for _, r := range final.Desired {
		want[r.Key()] = true
	}
	for _, kind := range []string{"Deployment", "ResourceClaimTemplate"} {
		var names []string
		switch kind {
		case "Deployment":
			l, err := c.Client().AppsV1().Deployments("outage").List(ctx, metav1.ListOptions{LabelSelector: objects.LabelStack + "=outage"})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range l.Items {
				names = append(names, d.Name)
			}
		case "ResourceClaimTemplate":
			l, err := c.Client().ResourceV1().ResourceClaimTemplates("outage").List(ctx, metav1.ListOptions{LabelSelector: objects.LabelStack + "=outage"})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range l.Items {
				names = append(names, d.Name)
			}
		}
		if len(names) != 1 {
			t.Errorf("%d %s objects left in the stack (%v), want 1", len(names), kind, names)
		}
	}
	refs, err := e.Inventory.Load(ctx, "outage")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != len(want) {
		t.Errorf("inventory has %d objects, want %d", len(refs), len(want))
	}
	for _, r := range refs {
		if !want[r.Key()] {
			t.Errorf("inventory still lists %s", r)
		}
	}
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i > 0 {
		return s[:i]
	}
	return s
}

func boolPtr(b bool) *bool { return &b }

func mustDeviceClass(name string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "example.com"`}}},
	}}
}
