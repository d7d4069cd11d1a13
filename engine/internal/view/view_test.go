package view_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/internal/view/viewtest"
	"github.com/gpuslice/gpuslice/engine/kube"
)

var deployments = view.ManagedKind("apps", "Deployment")

func deployment(name, rv string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", ResourceVersion: rv,
			Labels: map[string]string{contract.LabelManagedBy: contract.ManagedBy, objects.LabelStack: "s"}},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas},
	}
}

// watched is a view whose Deployment watch the test feeds by hand, so it
// decides when the informer sees a change.
func watched(t *testing.T, objs ...runtime.Object) (*view.View, *watch.RaceFreeFakeWatcher) {
	t.Helper()
	v, client := viewtest.New(t, objs...)
	w := watch.NewRaceFreeFake()
	client.PrependWatchReactor("deployments", func(clienttesting.Action) (bool, watch.Interface, error) { return true, w, nil })
	return v, w
}

func replicasOf(t *testing.T, obj any) int32 {
	t.Helper()
	d, err := view.As[appsv1.Deployment](obj)
	if err != nil || d == nil {
		t.Fatalf("not a deployment: %v (%v)", obj, err)
	}
	return *d.Spec.Replicas
}

// A read after the engine's own write waits until the informer shows the
// write's resourceVersion, however late the watch delivers it.
func TestReadYourWrites(t *testing.T) {
	ctx := context.Background()
	v, w := watched(t, deployment("ollama", "10", 1))
	if obj, err := v.Get(ctx, deployments, "team-a", "ollama"); err != nil || replicasOf(t, obj) != 1 {
		t.Fatalf("first read: %v %v", obj, err)
	}
	v.Observe(kube.Write{Resource: schema.GroupResource{Group: "apps", Resource: "deployments"}, Namespace: "team-a", Name: "ollama",
		ResourceVersion: "11", Labels: deployment("", "", 0).Labels})

	got := make(chan any, 1)
	go func() {
		obj, err := v.Get(ctx, deployments, "team-a", "ollama")
		if err != nil {
			t.Error(err)
		}
		got <- obj
	}()
	select {
	case obj := <-got:
		t.Fatalf("read returned %d replicas before the informer saw the write", replicasOf(t, obj))
	case <-time.After(200 * time.Millisecond):
	}
	w.Modify(viewtest.Unstructured(t, deployment("ollama", "11", 3)))
	if r := replicasOf(t, <-got); r != 3 {
		t.Fatalf("read after the write shows %d replicas, want 3", r)
	}
	// Settled: the next read does not wait.
	if obj, err := v.Get(ctx, deployments, "team-a", "ollama"); err != nil || replicasOf(t, obj) != 3 {
		t.Fatalf("second read: %v %v", obj, err)
	}
}

// A deletion the engine sent is a barrier too: the deleted object is not
// read back from a cache that has not seen the deletion yet.
func TestReadYourDeletes(t *testing.T) {
	ctx := context.Background()
	v, w := watched(t, deployment("ollama", "10", 1))
	if _, err := v.Get(ctx, deployments, "team-a", "ollama"); err != nil {
		t.Fatal(err)
	}
	v.Observe(kube.Write{Resource: schema.GroupResource{Group: "apps", Resource: "deployments"}, Namespace: "team-a", Name: "ollama",
		ResourceVersion: "10", Deleted: true})
	got := make(chan any, 1)
	go func() {
		obj, err := v.Get(ctx, deployments, "team-a", "ollama")
		if err != nil {
			t.Error(err)
		}
		got <- obj
	}()
	select {
	case obj := <-got:
		t.Fatalf("read returned %v before the informer saw the deletion", obj)
	case <-time.After(200 * time.Millisecond):
	}
	w.Delete(viewtest.Unstructured(t, deployment("ollama", "12", 1)))
	if obj := <-got; obj != nil {
		t.Fatalf("deleted object still read: %v", obj)
	}
}

// Writes outside a resource's selector, or to another resource, hold no
// read up.
func TestUnrelatedWritesDoNotWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, _ := watched(t, deployment("ollama", "10", 1))
	if _, err := v.Get(ctx, deployments, "team-a", "ollama"); err != nil {
		t.Fatal(err)
	}
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	v.Observe(kube.Write{Resource: gr, Namespace: "team-a", Name: "unmanaged", ResourceVersion: "21"})
	v.Observe(kube.Write{Resource: schema.GroupResource{Group: "apps", Resource: "statefulsets"}, Namespace: "team-a", Name: "x",
		ResourceVersion: "22", Labels: deployment("", "", 0).Labels})
	if _, err := v.Get(ctx, deployments, "team-a", "ollama"); err != nil {
		t.Fatalf("an unrelated write held the read up: %v", err)
	}
}

// Changes made by others arrive by watch: a long-lived view (reconcile's)
// shows them without being started again.
func TestOthersChangesArriveByWatch(t *testing.T) {
	ctx := context.Background()
	v, w := watched(t, deployment("ollama", "10", 1))
	if _, err := v.Get(ctx, deployments, "team-a", "ollama"); err != nil {
		t.Fatal(err)
	}
	changed, stop := v.Subscribe()
	defer stop()
	w.Modify(viewtest.Unstructured(t, deployment("ollama", "15", 5)))
	// Notifications are coalesced and may be for the initial list's
	// objects: wait for one after which the view shows the change.
	guard := time.After(30 * time.Second)
	for {
		select {
		case <-changed:
		case <-guard:
			t.Fatal("the view never showed the change")
		}
		if obj, _ := v.Get(ctx, deployments, "team-a", "ollama"); replicasOf(t, obj) == 5 {
			return
		}
	}
}

// Without the right to list a cluster-wide resource in every namespace,
// the view reads the namespaces asked for one by one; an error of another
// kind is returned and the next read tries again.
func TestForbiddenClusterWideFallsBackToNamespaces(t *testing.T) {
	ctx := context.Background()
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "team-a"}}
	v, client := viewtest.New(t, claim)
	failures := 0
	client.PrependReactor("list", "resourceclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch {
		case a.GetNamespace() == "" && failures == 0:
			failures++
			return true, nil, errors.New("connection refused")
		case a.GetNamespace() == "":
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "resourceclaims"}, "", errors.New("RBAC"))
		}
		return false, nil, nil
	})
	if _, err := v.List(ctx, view.ResourceClaims, "team-a"); err == nil || apierrors.IsForbidden(err) {
		t.Fatalf("first read: %v, want the connection error", err)
	}
	objs, err := v.List(ctx, view.ResourceClaims, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if cs := view.Typed[resourcev1.ResourceClaim](objs); len(cs) != 1 || cs[0].Name != "c" {
		t.Fatalf("claims of team-a: %v", objs)
	}
	if _, err := v.List(ctx, view.ResourceClaims); !apierrors.IsForbidden(err) {
		t.Fatalf("cluster-wide read without namespaces: %v, want forbidden", err)
	}
}

// A namespaced kind is listed and watched only in the namespaces read or
// warmed, never across the cluster: other tenants' objects cost a run
// nothing. A read naming no namespace is refused as the bug it is.
func TestNamespacedKindsAreReadPerNamespace(t *testing.T) {
	ctx := context.Background()
	quota := func(ns string) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: ns}}
	}
	v, client := viewtest.New(t, quota("team-a"), quota("team-b"), quota("other"),
		deployment("ollama", "10", 1))
	v.WarmIn([]string{"team-b"}, view.ResourceQuotas, deployments)
	// WarmIn starts its informers before it returns (they list and watch
	// beside the caller).
	if !slices.Contains(v.Informers(), view.Informer{Resource: deployments, Namespace: "team-b"}) {
		t.Fatalf("WarmIn started %v, not the deployments of team-b", v.Informers())
	}
	objs, err := v.List(ctx, view.ResourceQuotas, "team-a", "team-b")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Errorf("quotas of team-a and team-b: %d, want 2", len(objs))
	}
	if obj, err := v.Get(ctx, deployments, "team-a", "ollama"); err != nil || obj == nil {
		t.Fatalf("deployment team-a/ollama: %v %v", obj, err)
	}
	if _, err := v.List(ctx, view.ResourceQuotas); err == nil {
		t.Error("a read of quotas in no namespace was served; want it refused")
	}
	// The warmed informer of team-b's deployments has listed once it has
	// synced, which this read waits for.
	if _, err := v.Get(ctx, deployments, "team-b", "ollama"); err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, a := range client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			continue
		}
		if a.GetNamespace() == "" {
			t.Errorf("%s %s across the cluster", a.GetVerb(), a.GetResource().Resource)
		}
		read[a.GetResource().Resource+" in "+a.GetNamespace()] = true
	}
	for _, want := range []string{"resourcequotas in team-a", "resourcequotas in team-b", "deployments in team-a", "deployments in team-b"} {
		if !read[want] {
			t.Errorf("never read %s; read %v", want, read)
		}
	}
	if read["resourcequotas in other"] {
		t.Error("read the quotas of a namespace no one asked for")
	}
	if n := len(v.Informers()); n != 4 {
		t.Errorf("%d informers, want 4: %v", n, v.Informers())
	}
}

// A namespace is read by name, and a write to it is a barrier for that
// read like any other.
func TestNamespaceByNameReadsYourWrites(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "10"}}
	v, client := viewtest.New(t, ns, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", ResourceVersion: "11"}})
	w := watch.NewRaceFreeFake()
	client.PrependWatchReactor("namespaces", func(clienttesting.Action) (bool, watch.Interface, error) { return true, w, nil })
	ref := objects.Ref{Kind: "Namespace", Name: "team-a"}
	if u, err := v.Live(ctx, ref); err != nil || u == nil || len(u.GetLabels()) != 0 {
		t.Fatalf("first read of namespace team-a: %v %v", u, err)
	}
	labels := map[string]string{"gpuslice.dev/tenant": "true"}
	v.Observe(kube.Write{Resource: schema.GroupResource{Resource: "namespaces"}, Name: "team-a", ResourceVersion: "12", Labels: labels})
	got := make(chan map[string]string, 1)
	go func() {
		u, err := v.Live(ctx, ref)
		if err != nil || u == nil {
			t.Errorf("read after the write: %v %v", u, err)
			got <- nil
			return
		}
		got <- u.GetLabels()
	}()
	select {
	case l := <-got:
		t.Fatalf("read returned labels %v before the informer saw the write", l)
	case <-time.After(200 * time.Millisecond):
	}
	labelled := ns.DeepCopy()
	labelled.ResourceVersion, labelled.Labels = "12", labels
	w.Modify(viewtest.Unstructured(t, labelled))
	if l := <-got; l["gpuslice.dev/tenant"] != "true" {
		t.Fatalf("read after the write shows labels %v", l)
	}
	for _, a := range client.Actions() {
		if l, ok := a.(clienttesting.ListAction); ok && l.GetListRestrictions().Fields.String() != "metadata.name=team-a" {
			t.Errorf("namespaces listed with fields %q, want only team-a by name", l.GetListRestrictions().Fields)
		}
	}
}

// Live finds an object gpuslice did not label (one in the way) with a GET,
// and never asks the API server for objects the view holds.
func TestLiveFetchesOnlyWhatTheViewCannotHold(t *testing.T) {
	ctx := context.Background()
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "team-a"}}
	ours := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ours", Namespace: "team-a", Labels: deployment("", "", 0).Labels}}
	v, client := viewtest.New(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, theirs, ours)
	ref := func(name string) objects.Ref { return objects.Ref{Kind: "ConfigMap", Namespace: "team-a", Name: name} }
	for name, want := range map[string]bool{"ours": true, "theirs": true, "missing": false} {
		u, err := v.Live(ctx, ref(name))
		if err != nil {
			t.Fatal(err)
		}
		if (u != nil) != want {
			t.Errorf("Live(%s) = %v, want found %v", name, u, want)
		}
		if u != nil && u.GetName() != name {
			t.Errorf("Live(%s) returned %s", name, u.GetName())
		}
	}
	gets := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" {
			gets++
		}
	}
	if gets != 2 {
		t.Errorf("%d GETs, want 2 (theirs and missing; ours is in the view)", gets)
	}
	u, _ := v.Live(ctx, ref("ours"))
	u.SetLabels(nil)
	if again, _ := v.Live(ctx, ref("ours")); len(again.GetLabels()) == 0 {
		t.Error("Live returned the cache's own object: changing it changed the view")
	}
}

// In a namespace that does not exist nothing is in the way: Live asks
// the API server nothing, however many objects a first apply plans there;
// once the namespace exists, an object not in the view is fetched again.
func TestLiveAsksNothingInANamespaceThatDoesNotExist(t *testing.T) {
	ctx := context.Background()
	v, client := viewtest.New(t)
	gets := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" {
				n++
			}
		}
		return n
	}
	for i := range 50 {
		u, err := v.Live(ctx, objects.Ref{Kind: "ConfigMap", Namespace: "new-team", Name: fmt.Sprint("cm-", i)})
		if err != nil || u != nil {
			t.Fatalf("Live in a namespace that does not exist: %v, %v", u, err)
		}
	}
	if n := gets(); n != 0 {
		t.Errorf("%d GETs for objects in a namespace that does not exist, want 0", n)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new-team"}}
	if err := client.Tracker().Add(viewtest.Unstructured(t, ns)); err != nil {
		t.Fatal(err)
	}
	v.Reset()
	if _, err := v.Live(ctx, objects.Ref{Kind: "ConfigMap", Namespace: "new-team", Name: "cm-0"}); err != nil {
		t.Fatal(err)
	}
	if n := gets(); n != 1 {
		t.Errorf("%d GETs once the namespace exists, want 1 (the object is not in the view)", n)
	}
}

// Close returns once every informer's goroutines have ended; Reset stops
// one generation before the next starts.
func TestCloseStopsEveryInformer(t *testing.T) {
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpuslice", Namespace: "team-a"}}
	v, _ := viewtest.New(t, quota, deployment("ollama", "10", 1))
	read := func() {
		t.Helper()
		if _, err := v.List(ctx, view.ResourceQuotas, "team-a"); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Get(ctx, deployments, "team-a", "ollama"); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if v.Started() != 2 || v.Running() == 0 {
		t.Fatalf("%d informers, %d goroutines after two reads; want 2 informers running", v.Started(), v.Running())
	}
	v.Reset()
	if v.Started() != 0 || v.Running() != 0 {
		t.Fatalf("after Reset: %d informers, %d goroutines still running", v.Started(), v.Running())
	}
	read()
	v.Close()
	if n := v.Running(); n != 0 {
		t.Fatalf("%d informer goroutines still running after Close", n)
	}
	if _, err := v.Get(ctx, deployments, "team-a", "ollama"); err == nil {
		t.Fatal("a closed view still reads")
	}
}

// As converts an object once, however often a plan reads it, and hands out
// copies: what one reader does to its copy never shows in the next read.
func TestAsHandsOutCopies(t *testing.T) {
	v, _ := watched(t, deployment("ollama", "10", 1))
	obj, err := v.Get(context.Background(), deployments, "team-a", "ollama")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		d, err := view.As[appsv1.Deployment](obj)
		if err != nil {
			t.Fatal(err)
		}
		if *d.Spec.Replicas != 1 || d.Labels["changed"] != "" {
			t.Fatalf("a reader's change shows in the next read: replicas %d, labels %v", *d.Spec.Replicas, d.Labels)
		}
		*d.Spec.Replicas = 7
		d.Labels["changed"] = "by a reader"
	}
}

// The view keeps which fields gpuslice's apply owns (plan prunes by them)
// and who else manages an object, but not the other managers' field sets:
// the controller's status set alone outweighs many an object's spec.
func TestKeepsOnlyGpuslicesFieldSets(t *testing.T) {
	d := deployment("ollama", "10", 1)
	fields := func(s string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(s)} }
	d.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: objects.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: fields(`{"f:spec":{"f:replicas":{}}}`)},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: fields(`{"f:status":{"f:replicas":{}}}`)},
	}
	v, _ := watched(t, d)
	obj, err := v.Get(context.Background(), deployments, "team-a", "ollama")
	if err != nil {
		t.Fatal(err)
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		t.Fatalf("%T has no metadata", obj)
	}
	got := map[string]string{}
	for _, mf := range m.GetManagedFields() {
		got[mf.Manager+"/"+string(mf.Operation)] = ""
		if mf.FieldsV1 != nil {
			got[mf.Manager+"/"+string(mf.Operation)] = string(mf.FieldsV1.Raw)
		}
	}
	want := map[string]string{
		objects.FieldManager + "/Apply":  `{"f:spec":{"f:replicas":{}}}`,
		"kube-controller-manager/Update": "",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("managed fields in the view: %v, want %v", got, want)
	}
}

// An informer keeps an index only from its first use on (a plan uses
// none): the objects it already holds are indexed then, and those that
// arrive later as they come.
func TestIndexFromItsFirstUse(t *testing.T) {
	ctx := context.Background()
	of := func(name, rv, workload string) *appsv1.Deployment {
		d := deployment(name, rv, 1)
		d.Labels[objects.LabelWorkload] = workload
		return d
	}
	v, w := watched(t, of("a", "10", "a"), of("b", "10", "b"))
	if _, err := v.Get(ctx, deployments, "team-a", "a"); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		objs, err := v.ByIndex(ctx, deployments, "team-a", view.IndexWorkload, "team-a/a")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.(metav1.Object).GetName())
		}
		slices.Sort(out)
		return out
	}
	if got := names(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("workload a's objects held before the index: %v, want [a]", got)
	}
	later := of("a-preload", "11", "a")
	v.Observe(kube.Write{Resource: schema.GroupResource{Group: "apps", Resource: "deployments"}, Namespace: "team-a", Name: later.Name,
		ResourceVersion: "11", Labels: later.Labels})
	w.Add(viewtest.Unstructured(t, later))
	if got := names(); !slices.Equal(got, []string{"a", "a-preload"}) {
		t.Fatalf("workload a's objects after one more arrived: %v, want [a a-preload]", got)
	}
}
