package apply

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine/plan"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// deleteAndWait deletes the object a replacement supersedes and waits,
// at most timeout, until it is gone. Deletion is in the foreground, so
// the old pods (and the GPU slices their claims hold) are gone before
// the new object asks for its own.
func deleteAndWait(ctx context.Context, client dynamic.Interface, c plan.Change, timeout time.Duration) error {
	res, _ := resourceFor(client, c.Ref)
	err := res.Delete(ctx, c.Ref.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	if err != nil && !apierrors.IsNotFound(err) {
		return wrap(c, fmt.Errorf("delete the old object: %w", err))
	}
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *unstructured.Unstructured
	err = wait.PollUntilContextCancel(waitCtx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		obj, err := res.Get(ctx, c.Ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		last = obj
		return false, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() == nil && last != nil && (waitCtx.Err() != nil || timedOut(waitCtx)):
		// The deadline may have passed before its context says so: a Get
		// then fails in client-go's rate limiter ("would exceed context
		// deadline") rather than with the context's error.
		return wrap(c, stillDeleting(ctx, client, last, timeout))
	default:
		return wrap(c, fmt.Errorf("wait for the old object to be deleted: %w", err))
	}
}

// stillDeleting says what holds up the deletion of obj: its pods that
// have not stopped, or else its finalizers.
func stillDeleting(ctx context.Context, client dynamic.Interface, obj *unstructured.Unstructured, waited time.Duration) error {
	head := fmt.Sprintf("the old %s is still being deleted after %s", obj.GetKind(), waited)
	if pods := terminatingPods(ctx, client, obj); len(pods) > 0 {
		return fmt.Errorf("%s: its pods %s have not stopped; a pod stays Terminating while its node's kubelet is down: "+
			"bring the node back, or remove them with `kubectl delete pod -n %s --force <pod>`, then apply again",
			head, strings.Join(pods, ", "), obj.GetNamespace())
	}
	return fmt.Errorf("%s: it waits on finalizers %s; the garbage collector (kube-controller-manager) removes "+
		"its dependents first: check that it runs, then apply again", head, strings.Join(obj.GetFinalizers(), ", "))
}

// terminatingPods names the pods obj's selector picks that are being
// deleted, with their nodes.
func terminatingPods(ctx context.Context, client dynamic.Interface, obj *unstructured.Unstructured) []string {
	sel, found, _ := unstructured.NestedStringMap(obj.Object, "spec", "selector", "matchLabels")
	if !found || len(sel) == 0 || obj.GetNamespace() == "" {
		return nil
	}
	list, err := client.Resource(podsGVR).Namespace(obj.GetNamespace()).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: sel}),
	})
	if err != nil {
		return []string{fmt.Sprintf("(unreadable: %v)", err)}
	}
	var out []string
	for _, p := range list.Items {
		if p.GetDeletionTimestamp() == nil {
			continue
		}
		node, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName")
		out = append(out, fmt.Sprintf("%s (node %s)", p.GetName(), node))
	}
	return out
}

// timedOut says whether ctx's deadline has passed.
func timedOut(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
