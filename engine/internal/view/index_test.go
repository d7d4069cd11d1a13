package view

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// An informer that stopped between a read finding it and the read asking
// it for an index takes no index any more: the read still answers, from
// what the informer holds.
func TestByIndexOfAStoppedInformer(t *testing.T) {
	deployment := func(name, workload string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", ResourceVersion: "1",
			Labels: map[string]string{objects.LabelWorkload: workload}}}
	}
	k := entryKey{res: ManagedKind("apps", "Deployment"), namespace: "team-a"}
	start, indexed := startIndexers(k)
	lw := &cache.ListWatch{
		ListFunc:  func(metav1.ListOptions) (runtime.Object, error) { return &appsv1.DeploymentList{}, nil },
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}
	inf := cache.NewSharedIndexInformer(lw, &appsv1.Deployment{}, 0, start)
	for _, d := range []*appsv1.Deployment{deployment("a", "a"), deployment("b", "b"), deployment("a-preload", "a")} {
		if err := inf.GetIndexer().Add(d); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	inf.RunWithContext(ctx) // returns at once, stopped
	e := &entry{key: k, informer: inf, indexed: indexed}
	objs, err := e.byIndex(IndexWorkload, "team-a/a")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.(metav1.Object).GetName())
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "a-preload"}) {
		t.Errorf("workload a's objects in a stopped informer: %v, want [a a-preload]", names)
	}
	if e.indexed[IndexWorkload] {
		t.Error("a stopped informer took an index")
	}
}
