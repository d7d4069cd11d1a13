package view_test

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// Without the right to list a resource cluster-wide, the view reads the
// namespaces asked for one by one; an error of another kind is returned
// and the next read tries again.
func TestForbiddenClusterWideFallsBackToNamespaces(t *testing.T) {
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpuslice", Namespace: "team-a"}}
	v, client := viewtest.New(t, quota)
	failures := 0
	client.PrependReactor("list", "resourcequotas", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch {
		case a.GetNamespace() == "" && failures == 0:
			failures++
			return true, nil, errors.New("connection refused")
		case a.GetNamespace() == "":
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "resourcequotas"}, "", errors.New("RBAC"))
		}
		return false, nil, nil
	})
	if _, err := v.List(ctx, view.ResourceQuotas, "team-a"); err == nil || apierrors.IsForbidden(err) {
		t.Fatalf("first read: %v, want the connection error", err)
	}
	objs, err := v.List(ctx, view.ResourceQuotas, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if qs := view.Typed[corev1.ResourceQuota](objs); len(qs) != 1 || qs[0].Name != "gpuslice" {
		t.Fatalf("quotas of team-a: %v", objs)
	}
	if _, err := v.List(ctx, view.ResourceQuotas); !apierrors.IsForbidden(err) {
		t.Fatalf("cluster-wide read without namespaces: %v, want forbidden", err)
	}
}

// Live finds an object gpuslice did not label (one in the way) with a GET,
// and never asks the API server for objects the view holds.
func TestLiveFetchesOnlyWhatTheViewCannotHold(t *testing.T) {
	ctx := context.Background()
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "team-a"}}
	ours := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ours", Namespace: "team-a", Labels: deployment("", "", 0).Labels}}
	v, client := viewtest.New(t, theirs, ours)
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
