package apply

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
)

// quotaSettle bounds the wait for the quota controller. It is a bound, not
// an expectation: the controller takes a new quota in within milliseconds.
const quotaSettle = 10 * time.Second

// waitQuotasObserved waits until the quota controller has taken in the
// quotas just applied (status.hard equals spec.hard) before the next level
// creates what they count. A pod or claim admitted in the moment before the
// API server's quota admission sees a new quota is never charged until the
// controller's next full resync (minutes): the quota would be bypassed.
// One watch of the stack's quotas serves them all. Past quotaSettle, apply
// goes on: a stopped controller-manager must not block it.
func waitQuotasObserved(ctx context.Context, client dynamic.Interface, stack string, changes []plan.Change) {
	pending := map[string]bool{}
	for _, c := range changes {
		if c.Ref.Group == "" && c.Ref.Kind == "ResourceQuota" {
			pending[c.Ref.Namespace+"/"+c.Ref.Name] = true
		}
	}
	if len(pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, quotaSettle)
	defer cancel()
	k, _ := objects.KindOf("", "ResourceQuota")
	w, err := client.Resource(k.GVR).Namespace(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{LabelSelector: objects.LabelStack + "=" + stack})
	if err != nil {
		return
	}
	defer w.Stop()
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			u, ok := ev.Object.(runtime.Unstructured)
			if !ok {
				continue
			}
			var q corev1.ResourceQuota
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &q) != nil {
				continue
			}
			if apiequality.Semantic.DeepEqual(q.Spec.Hard, q.Status.Hard) {
				delete(pending, q.Namespace+"/"+q.Name)
			}
		}
	}
}
