package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/engine"
	enginekube "github.com/gpuslice/gpuslice/engine/kube"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/provider"
)

// readsConfig is a package, two quotas and n workloads (no replicas, so
// controllers stay quiet): n+3 resources.
func readsConfig(n int) string {
	var b strings.Builder
	b.WriteString(providerBlock())
	b.WriteString(`
resource "gpuslice_package" "p" {
  name      = "acc-reads-8gi"
  gpu_model = "` + sliceModel + `"
  fraction  = 25
}
`)
	for q := range 2 {
		fmt.Fprintf(&b, `
resource "gpuslice_quota" "q%d" {
  namespace    = "acc-reads-%d"
  slices       = { (gpuslice_package.p.name) = 100 }
  cpu_requests = "100"
}
`, q, q)
	}
	for i := range n {
		fmt.Fprintf(&b, `
resource "gpuslice_workload" "w%d" {
  namespace = gpuslice_quota.q%d.namespace
  name      = "w%d"
  package   = gpuslice_package.p.name
  replicas  = 0
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "4Gi"
    port {
      container_port = 11434
    }
  }
  expose {
    port = 11434
  }
}
`, i, i%2, i)
	}
	return b.String()
}

// requestsOfLastRun is a plan check that keeps what the provider's run
// that made the plan sent: its engine is the last one configured (reading
// the saved plan configures none).
type requestsOfLastRun struct {
	p         func() (enginekube.Counts, int)
	counts    *enginekube.Counts
	informers *int
	fast      func()
}

func (r requestsOfLastRun) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, _ *plancheck.CheckPlanResponse) {
	*r.counts, *r.informers = r.p()
	r.fast()
}

// One `terraform plan` (refresh, then every resource's ModifyPlan) of 23
// and of 43 resources sends the same list requests: every resource reads
// from the run's one view, whose informers list each kind once per
// namespace the configuration names, whatever its resources. Configure
// starts the cluster-wide ones, the first resource naming a namespace that
// namespace's. Every resource of such a plan is read and planned by the
// fast path (checked against the framework's answer).
func TestAccPlanListsDoNotGrowWithResources(t *testing.T) {
	needCluster(t)
	p := provider.New("test")()
	factories := map[string]func() (tfprotov6.ProviderServer, error){"gpuslice": provider.NewCheckedServer(p)}
	last := func() (enginekube.Counts, int) { return provider.LastRun(p) }
	var prefetched, reads []engine.Read
	const small, large = 20, 40
	var smallReq, largeReq enginekube.Counts
	var smallInf, largeInf int
	step := func(n int, counts *enginekube.Counts, informers *int) []resource.TestStep {
		var before provider.Served
		return []resource.TestStep{
			{Config: readsConfig(n), Check: func(*terraform.State) error {
				before = provider.FastServed(p)
				return nil
			}},
			{
				Config: readsConfig(n), PlanOnly: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(), requestsOfLastRun{p: last, counts: counts, informers: informers, fast: func() {
						prefetched, reads = provider.Prefetched(p), provider.LastReads(p)
						after, resources := provider.FastServed(p), int64(n+3)
						if after.Upgrade-before.Upgrade < resources || after.Read-before.Read < resources || after.Plan-before.Plan < resources {
							t.Errorf("the fast path served %d state upgrades, %d reads and %d plans of a no-change plan of %d resources; want each resource's",
								after.Upgrade-before.Upgrade, after.Read-before.Read, after.Plan-before.Plan, resources)
						}
					}},
				}},
			},
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps:                    append(step(small, &smallReq, &smallInf), step(large, &largeReq, &largeInf)...),
	})
	if t.Failed() {
		return
	}
	t.Logf("plan of %d resources: %s, %d informers", small+3, smallReq, smallInf)
	t.Logf("plan of %d resources: %s, %d informers", large+3, largeReq, largeInf)
	// An informer's first list is a watch that streams the objects
	// (client-go's WatchList) or a LIST: count both, and GETs.
	if smallReq.Reads() == 0 || smallInf == 0 {
		t.Fatalf("the plan's run read nothing (%s, %d informers): the check did not see the plan's engine", smallReq, smallInf)
	}
	if largeReq.Reads() != smallReq.Reads() || largeReq.List != smallReq.List || largeInf != smallInf {
		t.Errorf("reads grew with the resources: %d resources %s (%d informers), %d resources %s (%d informers)",
			small+3, smallReq, smallInf, large+3, largeReq, largeInf)
	}
	// Every informer the plan ran was Configure's, or reads one of the
	// configuration's namespaces (started by the first resource naming it).
	started := map[engine.Read]bool{}
	for _, r := range prefetched {
		started[r] = true
	}
	for _, r := range reads {
		if !started[r] && !inNamespaces(r, readsNamespaces) {
			t.Errorf("the plan read %s, which neither Configure started (engine.Prefetch) nor reads a namespace of the configuration", r)
		}
	}
	if writes := largeReq.Total() - largeReq.Reads(); writes != 0 {
		t.Errorf("a plan wrote %d times", writes)
	}
}

// readsNamespaces are the namespaces of readsConfig.
var readsNamespaces = []string{"acc-reads-0", "acc-reads-1"}

// inNamespaces says whether a read is of one of namespaces: in it, or the
// Namespace object itself by name.
func inNamespaces(r engine.Read, namespaces []string) bool {
	for _, ns := range namespaces {
		if r.Namespace == ns || (r.Kind == "Namespace" && r.Fields == "metadata.name="+ns) {
			return true
		}
	}
	return false
}

// The reads a plan may make across the cluster of a namespaced kind, each
// for the check that needs it.
var clusterWideJustified = map[string]string{
	"configmaps labelled app.kubernetes.io/managed-by=gpuslice with metadata.name=gpuslice-platform": "the platform's settings, which every resource renders with, found by name in whichever namespace the platform was applied to",
}

// claimsRead is the read of every claim's allocation: justified only when
// a workload wants more pods than it runs (the free-slice check).
const claimsRead = "resourceclaims.resource.k8s.io"

// unjustifiedReads lists the reads of a plan of the configuration of
// namespaces that go beyond them: a namespaced kind read in every namespace
// without a check that needs it, another namespace's objects, namespaces
// listed whole. The inventories' namespace holds one small ConfigMap per
// stack; a plan reads its stacks' inventories from one watch of it.
func unjustifiedReads(reads []engine.Read, freeSlices bool, namespaces ...string) []string {
	var out []string
	for _, r := range reads {
		switch {
		case inNamespaces(r, namespaces):
		case r.Namespace == "gpuslice-system" && r.Kind == "ConfigMap":
		case r.Kind == "Namespace":
			out = append(out, r.String()+": namespaces are read by name, the configuration's only")
		case r.Namespace != "":
			out = append(out, r.String()+": a namespace the configuration does not name")
		case !r.Namespaced:
		case clusterWideJustified[r.Resource] != "":
		case r.Resource == claimsRead && freeSlices:
		default:
			out = append(out, r.String()+": a namespaced kind read across the cluster; read it in the configuration's namespaces, or name the check that needs it in clusterWideJustified")
		}
	}
	return out
}

// A plan reads the namespaces its configuration names, never other
// tenants': their pods, claims, quotas, limit ranges and namespaces, and
// the objects of another gpuslice stack, cost it nothing. Across the
// cluster it reads only what a check needs: the platform's settings by
// name, the published slices and the packages (cluster-scoped), and every
// claim's allocation only when a workload wants more pods than it runs —
// the free-slice check.
//
// The free-slice check counts what is published: with no slice published
// it has nothing to read, so the test needs the slices of a node plugin.
func TestAccPlanReadsOnlyItsNamespaces(t *testing.T) {
	needSlices(t)
	ctx := context.Background()
	other := "acc-reads-other-tenant"
	if _, err := cluster.CreateNamespace(ctx, kube, other, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), other, metav1.DeleteOptions{}) })
	if err := cluster.WaitForServiceAccount(ctx, kube, other); err != nil {
		t.Fatal(err)
	}
	theirs(t, other)

	p := provider.New("test")()
	factories := map[string]func() (tfprotov6.ProviderServer, error){"gpuslice": provider.NewCheckedServer(p)}
	var noChange, scaleUp []engine.Read
	keep := func(into *[]engine.Read) plancheck.PlanCheck {
		return requestsOfLastRun{p: func() (enginekube.Counts, int) { return provider.LastRun(p) }, counts: new(enginekube.Counts), informers: new(int),
			fast: func() { *into = provider.LastReads(p) }}
	}
	const n = 4
	// One more pod for w0: the plan must count the free slices.
	wantsPod := strings.Replace(readsConfig(n), "replicas  = 0", "replicas  = 1", 1)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: readsConfig(n)},
			{Config: readsConfig(n), PlanOnly: true, ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
				plancheck.ExpectEmptyPlan(), keep(&noChange)}}},
			{Config: wantsPod, PlanOnly: true, ExpectNonEmptyPlan: true, ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
				keep(&scaleUp)}}},
		},
	})
	if t.Failed() {
		return
	}
	t.Logf("a no-change plan of %d workloads read %v", n, noChange)
	if len(noChange) == 0 || len(scaleUp) == 0 {
		t.Fatalf("no reads recorded (%d, %d): the checks did not see the plans' engines", len(noChange), len(scaleUp))
	}
	for _, r := range unjustifiedReads(noChange, false, readsNamespaces...) {
		t.Errorf("a no-change plan of workloads running all their pods read %s", r)
	}
	for _, r := range unjustifiedReads(scaleUp, true, readsNamespaces...) {
		t.Errorf("a plan of a workload wanting a pod read %s", r)
	}
	read := func(reads []engine.Read, resource string) bool {
		for _, r := range reads {
			if r.Resource == resource && r.Namespace == "" {
				return true
			}
		}
		return false
	}
	// The justification holds both ways: the free-slice check reads the
	// claims when, and only when, it counts.
	if read(noChange, claimsRead) {
		t.Error("a no-change plan of workloads running all their pods read every claim in the cluster; only the free-slice check of a workload wanting pods needs them")
	}
	if !read(scaleUp, claimsRead) {
		t.Errorf("a plan of a workload wanting a pod did not read the claims' allocations, so it cannot have counted the free slices; it read %v", scaleUp)
	}
}

// theirs creates another tenant's objects in ns: pods (one labelled as a
// workload of another stack), claims, a quota, a limit range, and another
// gpuslice stack's Deployment.
func theirs(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	for i, labels := range []map[string]string{nil, nil, {"gpuslice.dev/workload": "theirs"}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", i)},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "theirs"}}}}}}
		if _, err := kube.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "theirs"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: apiresource.MustParse("100")}}}
	if _, err := kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	limits := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: apiresource.MustParse("100m")}}}}}
	if _, err := kube.CoreV1().LimitRanges(ns).Create(ctx, limits, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app.kubernetes.io/managed-by": "gpuslice", "gpuslice.dev/stack": "theirs"}
	replicas := int32(0)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Labels: labels}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "theirs"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
