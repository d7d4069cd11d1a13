// Package apply carries out a plan with server-side apply (field manager
// gpuslice): levels in dependency order (namespaces and device classes,
// then quotas, then claim templates, volumes and services, then workloads),
// objects within a level concurrently with a bound, then pruning in reverse
// order. The stack's inventory is widened before anything changes and
// narrowed only after pruning, so an interrupted apply can always be
// re-run to convergence.
package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine/internal/inventory"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
)

// Options configure Run.
type Options struct {
	// ForceConflicts takes over fields another server-side applier owns.
	// Fields last changed by hand (kubectl edit, patch) are restored
	// without it: that is drift, and the configuration wins.
	ForceConflicts bool
	// Concurrency bounds the objects applied at once (default 8).
	Concurrency int
	// Progress, when set, is told about every object as it finishes.
	Progress func(Event)
	// ReplaceTimeout bounds how long a replacement waits for the old
	// object and its pods to go (default 10m, a workload's default
	// timeout).
	ReplaceTimeout time.Duration
}

// Event reports one object applied, pruned or failed.
type Event struct {
	Address  string
	Ref      objects.Ref
	Action   plan.Action
	Duration time.Duration
	Err      error
	// Restored lists managers whose hand edits were overwritten.
	Restored []string
}

// Run applies the plan. It returns every object error, joined.
func Run(ctx context.Context, client dynamic.Interface, inv inventory.Store, p *plan.Plan, opts Options) error {
	if opts.ReplaceTimeout <= 0 {
		opts.ReplaceTimeout = 10 * time.Minute
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(Event) {}
	}
	if !p.HasChanges() && sameRefs(p.Applied, p.Desired) {
		return nil
	}
	if err := inv.Save(ctx, p.Stack, append(append([]objects.Ref(nil), p.Applied...), p.Desired...)); err != nil {
		return err
	}

	byLevel := map[int][]plan.Change{}
	var prunes []plan.Change
	for _, c := range p.Changes {
		switch c.Action {
		case plan.Create, plan.Update, plan.Replace:
			k, _ := objects.KindOf(c.Ref.Group, c.Ref.Kind)
			byLevel[k.Level] = append(byLevel[k.Level], c)
		case plan.Delete, plan.Release:
			prunes = append(prunes, c)
		}
	}
	levels := make([]int, 0, len(byLevel))
	for l := range byLevel {
		levels = append(levels, l)
	}
	sort.Ints(levels)
	for _, l := range levels {
		// A level builds on the one before (a quota's namespace, a
		// workload's claim template): stop at the first failing level.
		if err := parallel(byLevel[l], opts.Concurrency, func(c plan.Change) error {
			start := time.Now()
			restored, err := applyOne(ctx, client, c, opts)
			progress(Event{Address: c.Address, Ref: c.Ref, Action: c.Action, Duration: time.Since(start), Err: err, Restored: restored})
			return err
		}); err != nil {
			return err
		}
		waitQuotasObserved(ctx, client, p.Stack, byLevel[l])
	}

	sort.SliceStable(prunes, func(i, j int) bool {
		ki, _ := objects.KindOf(prunes[i].Ref.Group, prunes[i].Ref.Kind)
		kj, _ := objects.KindOf(prunes[j].Ref.Group, prunes[j].Ref.Kind)
		return ki.Level > kj.Level
	})
	var failed []objects.Ref
	var errs []error
	for _, c := range prunes {
		start := time.Now()
		err := pruneOne(ctx, client, c)
		progress(Event{Address: c.Address, Ref: c.Ref, Action: c.Action, Duration: time.Since(start), Err: err})
		if err != nil {
			failed = append(failed, c.Ref)
			errs = append(errs, err)
		}
	}
	// Objects that could not be pruned stay in the inventory for next time.
	if err := inv.Save(ctx, p.Stack, append(append([]objects.Ref(nil), p.Desired...), failed...)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func parallel(changes []plan.Change, limit int, fn func(plan.Change) error) error {
	sem := make(chan struct{}, limit)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, c := range changes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(c); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

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
	return owners, wrap(c, err)
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
func appliersAmong(managers []string, live *unstructured.Unstructured) []string {
	if live == nil {
		return managers
	}
	ops := map[string]metav1.ManagedFieldsOperationType{}
	for _, mf := range live.GetManagedFields() {
		if ops[mf.Manager] != metav1.ManagedFieldsOperationApply {
			ops[mf.Manager] = mf.Operation
		}
	}
	var out []string
	for _, m := range managers {
		if op, known := ops[m]; !known || op == metav1.ManagedFieldsOperationApply {
			out = append(out, m)
		}
	}
	return out
}

func pruneOne(ctx context.Context, client dynamic.Interface, c plan.Change) error {
	res, kind := resourceFor(client, c.Ref)
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

func sameRefs(a, b []objects.Ref) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]bool{}
	for _, r := range a {
		seen[r.Key()] = true
	}
	for _, r := range b {
		if !seen[r.Key()] {
			return false
		}
	}
	return true
}

func quoteAll(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}
