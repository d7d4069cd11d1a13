package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
)

// One object: server-side apply (replacing first when the plan says so),
// delete or release.

func resourceFor(client dynamic.Interface, ref objects.Ref) (dynamic.ResourceInterface, objects.Kind) {
	k, _ := objects.KindOf(ref.Group, ref.Kind)
	if k.Namespaced {
		return client.Resource(k.GVR).Namespace(ref.Namespace), k
	}
	return client.Resource(k.GVR), k
}

// applyOne server-side applies one object, replacing it first when the
// plan says so. It returns the managers whose hand edits it overwrote.
func applyOne(ctx context.Context, client dynamic.Interface, c plan.Change, opts Options) ([]string, error) {
	force := opts.ForceConflicts
	res, _ := resourceFor(client, c.Ref)
	if c.Action == plan.Replace {
		if err := deleteAndWait(ctx, client, c, opts.ReplaceTimeout); err != nil {
			return nil, err
		}
	}
	if err := handOverReplicas(ctx, res, c); err != nil {
		return nil, err
	}
	body, err := json.Marshal(c.Desired.Object)
	if err != nil {
		return nil, err
	}
	_, err = res.Patch(ctx, c.Ref.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: objects.FieldManager, Force: ptr.To(force)})
	if err == nil || !apierrors.IsConflict(err) || force {
		return nil, wrap(c, err)
	}
	owners := conflictOwners(err)
	appliers := appliersAmong(owners, c.Live)
	if len(appliers) > 0 {
		return nil, fmt.Errorf("%s (%s): %w\nthese fields are managed by %s through server-side apply; rerun with -force-conflicts to take them over, or stop managing them there",
			c.Ref, c.Address, err, quoteAll(appliers))
	}
	// Only hand edits (kubectl edit/patch/replace) stand in the way: drift
	// from the configuration, which wins.
	_, err = res.Patch(ctx, c.Ref.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: objects.FieldManager, Force: ptr.To(true)})
	return withoutHandover(owners), wrap(c, err)
}

var conflictManager = regexp.MustCompile(`conflict with "([^"]+)"`)

func conflictOwners(err error) []string {
	var status apierrors.APIStatus
	seen := map[string]bool{}
	var owners []string
	add := func(msg string) {
		for _, m := range conflictManager.FindAllStringSubmatch(msg, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				owners = append(owners, m[1])
			}
		}
	}
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, cause := range status.Status().Details.Causes {
			add(cause.Message)
		}
	}
	if len(owners) == 0 {
		add(err.Error())
	}
	return owners
}

// appliersAmong returns the managers that own their fields through
// server-side apply (as opposed to updates by hand or by controllers).
func appliersAmong(managers []string, live runtime.Object) []string {
	if live == nil {
		return managers
	}
	m, err := meta.Accessor(live)
	if err != nil {
		return managers
	}
	ops := map[string]metav1.ManagedFieldsOperationType{}
	for _, mf := range m.GetManagedFields() {
		if ops[mf.Manager] != metav1.ManagedFieldsOperationApply {
			ops[mf.Manager] = mf.Operation
		}
	}
	var out []string
	for _, m := range managers {
		if m == objects.FieldManagerReplicas {
			continue // gpuslice's own, holding replicas while autoscaled
		}
		if op, known := ops[m]; !known || op == metav1.ManagedFieldsOperationApply {
			out = append(out, m)
		}
	}
	return out
}

func pruneOne(ctx context.Context, client dynamic.Interface, c plan.Change) error {
	res, kind := resourceFor(client, c.Ref)
	if c.Action == plan.Release && c.Reason == plan.KeptVolume {
		// Its spec cannot change: only leave the stack, saying for whom
		// it is kept.
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"labels":      map[string]any{objects.LabelStack: nil},
			"annotations": map[string]any{objects.AnnotationKeptFor: c.Address},
		}})
		_, err := res.Patch(ctx, c.Ref.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: objects.FieldManager})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return wrap(c, err)
	}
	if c.Action == plan.Release {
		// Applying nothing as gpuslice removes exactly the fields gpuslice
		// set, and leaves the object to its other owners.
		empty := map[string]any{"apiVersion": kind.GVR.GroupVersion().String(), "kind": c.Ref.Kind, "metadata": map[string]any{"name": c.Ref.Name}}
		if c.Ref.Namespace != "" {
			empty["metadata"].(map[string]any)["namespace"] = c.Ref.Namespace
		}
		body, _ := json.Marshal(empty)
		_, err := res.Patch(ctx, c.Ref.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: objects.FieldManager, Force: ptr.To(true)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return wrap(c, err)
	}
	err := res.Delete(ctx, c.Ref.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return wrap(c, err)
}

func wrap(c plan.Change, err error) error {
	if err == nil {
		return nil
	}
	hint := ""
	if apierrors.IsNotFound(err) && c.Ref.Namespace != "" {
		hint = fmt.Sprintf("; namespace %s may not exist: declare a gpuslice_quota for it (which creates it) or create it", c.Ref.Namespace)
	}
	addr := c.Address
	if addr != "" {
		addr = " (" + addr + ")"
	}
	return fmt.Errorf("%s %s%s: %w%s", c.Action, c.Ref, addr, err, hint)
}

func quoteAll(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}
