// Package apply carries out a plan with server-side apply (field manager
// gpuslice): levels in dependency order (namespaces and device classes,
// then quotas, then claim templates, volumes and services, then workloads),
// objects within a level concurrently with a bound, then pruning in reverse
// order. The stack's inventory is widened before anything changes and
// narrowed only after pruning, so an interrupted apply can always be
// re-run to convergence.
//
// Two writers of one stack are kept apart even without the state lock:
// before its first write apply checks the plan is not stale (the cluster
// still gives the same plan) and every inventory write is conditional on
// the version the writer read. A writer that finds the inventory changed
// under it stops starting writes at once (a watch on the inventory), lets
// the ones in flight finish, records what it did and fails with a
// *ConflictError; the other writer's apply stands.
package apply

import (
	"context"
	"errors"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

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
	// Stop, when done, stops the apply gracefully (a first Ctrl-C, a lost
	// lock): no new write starts, the writes in flight finish, the
	// inventory records what was done, and Run returns an
	// *InterruptedError with Stop's cause. Requests themselves use ctx.
	Stop context.Context
	// Replanned, when set, lets a stale plan go on: if the cluster changed
	// since p was made, Run plans again, tells Replanned and applies the
	// fresh plan, which replaces *p. Unset, a stale plan is refused with a
	// *StalePlanError before anything changes.
	Replanned func(fresh *plan.Plan)
	// Reader is what the stale-plan check plans again with (the engine's
	// view, which engine.Apply sets); nil skips the check.
	Reader plan.Reader
	// Writer is recorded in the inventory as who applies and from what
	// configuration (At, Digest and Complete are filled in).
	Writer plan.Writer
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

// Run applies the plan. It returns every object error, joined, or one of
// *StalePlanError, *ConflictError and *InterruptedError.
func Run(ctx context.Context, client dynamic.Interface, inv inventory.Store, p *plan.Plan, opts Options) error {
	opts = opts.withDefaults()
	if nothingToDo(p) {
		return nil
	}
	if opts.Reader != nil {
		if err := recheck(ctx, opts.Reader, inv, p, opts); err != nil {
			return err
		}
	}
	if nothingToDo(p) {
		return nil
	}
	w := opts.Writer
	w.At, w.Digest, w.Complete = time.Now(), p.Digest(), false
	r := &run{p: p, total: countChanges(p), started: map[string]objects.Ref{}}
	version, err := inv.Write(ctx, p.Stack, append(append([]objects.Ref(nil), p.Applied...), p.Desired...), p.InventoryVersion, w)
	var lost *inventory.ConflictError
	if errors.As(err, &lost) {
		return &ConflictError{Stack: p.Stack, By: lost.By, Total: r.total}
	}
	if err != nil {
		return err
	}
	fenceCtx, stopFence := context.WithCancel(ctx)
	defer stopFence()
	h := &halt{stop: opts.Stop, fence: inv.Fence(fenceCtx, p.Stack, version)}

	byLevel, prunes := sortChanges(p.Changes)
	failedLevel := r.applyLevels(ctx, client, byLevel, h, opts)
	var pr pruned
	if failedLevel == nil {
		pr = r.pruneAll(ctx, client, prunes, h, opts.Progress)
	}
	lost = h.conflict()
	stopFence()

	if lost != nil {
		// Beaten by another writer: change nothing more, except making
		// sure what this apply wrote and still exists is recorded (only
		// adds), or nothing would ever prune it.
		return errors.Join(&ConflictError{Stack: p.Stack, By: lost.By, Started: true, Done: r.done, Total: r.total},
			recordMissing(ctx, client, inv, p.Stack, r.startedRefs(), w))
	}
	if failedLevel != nil {
		// The widened inventory stays: it lists everything this apply may
		// have created, and the next plan finishes the job.
		return failedLevel
	}
	return r.narrow(ctx, client, inv, version, w, h, pr)
}

// withDefaults fills in the options left unset.
func (o Options) withDefaults() Options {
	if o.ReplaceTimeout <= 0 {
		o.ReplaceTimeout = 10 * time.Minute
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Progress == nil {
		o.Progress = func(Event) {}
	}
	return o
}

// sortChanges sorts the changes into the writes of each level and the
// prunes.
func sortChanges(changes []plan.Change) (byLevel map[int][]plan.Change, prunes []plan.Change) {
	byLevel = map[int][]plan.Change{}
	for _, c := range changes {
		switch c.Action {
		case plan.Create, plan.Update, plan.Replace:
			k, _ := objects.KindOf(c.Ref.Group, c.Ref.Kind)
			byLevel[k.Level] = append(byLevel[k.Level], c)
		case plan.Delete, plan.Release:
			prunes = append(prunes, c)
		}
	}
	return byLevel, prunes
}

// applyLevels writes the levels in order, each level's objects
// concurrently, and returns the first failing level's errors.
func (r *run) applyLevels(ctx context.Context, client dynamic.Interface, byLevel map[int][]plan.Change, h *halt, opts Options) error {
	levels := make([]int, 0, len(byLevel))
	for l := range byLevel {
		levels = append(levels, l)
	}
	sort.Ints(levels)
	for _, l := range levels {
		// A level builds on the one before (a quota's namespace, a
		// workload's claim template): stop at the first failing level.
		failedLevel := parallel(byLevel[l], opts.Concurrency, h, func(c plan.Change) error {
			r.start(c.Ref)
			start := time.Now()
			restored, err := applyOne(ctx, client, c, opts)
			r.finish(err)
			opts.Progress(Event{Address: c.Address, Ref: c.Ref, Action: c.Action, Duration: time.Since(start), Err: err, Restored: restored})
			return err
		})
		if failedLevel != nil {
			return failedLevel
		}
		if h.halted() != nil {
			return nil
		}
		waitQuotasObserved(ctx, client, r.p.Stack, byLevel[l])
	}
	return nil
}

// pruned is what pruning did: the objects it removed, those it failed to
// or left when halted, and its errors.
type pruned struct {
	removed, failed []objects.Ref
	errs            []error
}

// pruneAll removes the objects of prunes, and those of the inventory that
// reappeared, outermost level first; once halted it removes no more.
func (r *run) pruneAll(ctx context.Context, client dynamic.Interface, prunes []plan.Change, h *halt, progress func(Event)) pruned {
	var out pruned
	sort.SliceStable(prunes, func(i, j int) bool {
		ki, _ := objects.KindOf(prunes[i].Ref.Group, prunes[i].Ref.Kind)
		kj, _ := objects.KindOf(prunes[j].Ref.Group, prunes[j].Ref.Kind)
		return ki.Level > kj.Level
	})
	// Objects of the inventory that were gone when planning but exist
	// now were created meanwhile by a writer this one beat: they are
	// not in the configuration, so they go too.
	if h.halted() == nil {
		appeared, err := reappeared(ctx, client, r.p)
		if err != nil {
			out.errs = append(out.errs, err)
		}
		prunes = append(prunes, appeared...)
	}
	for _, c := range prunes {
		if h.halted() != nil {
			out.failed = append(out.failed, c.Ref) // not pruned: stays recorded
			continue
		}
		start := time.Now()
		err := pruneOne(ctx, client, c)
		r.done++
		progress(Event{Address: c.Address, Ref: c.Ref, Action: c.Action, Duration: time.Since(start), Err: err})
		if err != nil {
			out.failed = append(out.failed, c.Ref)
			out.errs = append(out.errs, err)
		} else {
			out.removed = append(out.removed, c.Ref)
		}
	}
	return out
}

// narrow records in the inventory what the apply leaves: the desired
// objects and those pruning failed to remove, or, interrupted, what was
// there less what was pruned plus what this apply wrote.
func (r *run) narrow(ctx context.Context, client dynamic.Interface, inv inventory.Store, version string, w plan.Writer, h *halt, pr pruned) error {
	p, errs := r.p, pr.errs
	keep := append(append([]objects.Ref(nil), p.Desired...), pr.failed...)
	var stopped error
	if stopped = h.halted(); stopped != nil {
		keep = append(minus(p.Applied, pr.removed), r.startedRefs()...)
	} else {
		w.Complete = len(errs) == 0
	}
	if _, err := inv.Write(ctx, p.Stack, keep, version, w); err != nil {
		var lost *inventory.ConflictError
		if errors.As(err, &lost) {
			err = errors.Join(&ConflictError{Stack: p.Stack, By: lost.By, Started: true, Done: r.done, Total: r.total},
				recordMissing(ctx, client, inv, p.Stack, keep, w))
		}
		errs = append(errs, err)
	}
	if stopped != nil {
		errs = append([]error{&InterruptedError{Stack: p.Stack, Done: r.done, Total: r.total, Cause: stopped}}, errs...)
	}
	return errors.Join(errs...)
}

func nothingToDo(p *plan.Plan) bool { return !p.HasChanges() && sameRefs(p.Applied, p.Desired) }

func countChanges(p *plan.Plan) int {
	n := 0
	for _, c := range p.Changes {
		if c.Action != plan.NoOp {
			n++
		}
	}
	return n
}

// recheck plans again and compares: the stale-plan check.
func recheck(ctx context.Context, reader plan.Reader, inv inventory.Store, p *plan.Plan, opts Options) error {
	rec, err := inv.Read(ctx, p.Stack)
	if err != nil {
		return err
	}
	fresh, err := plan.Make(ctx, reader, p.Stack, p.DesiredObjects(), rec.Refs, p.Options)
	if err != nil {
		return err
	}
	fresh.InventoryVersion, fresh.Last = rec.Version, rec.Last
	diffs := plan.Differences(p, fresh)
	if len(diffs) == 0 {
		return nil
	}
	if opts.Replanned == nil && fresh.InventoryVersion != p.InventoryVersion {
		return &ConflictError{Stack: p.Stack, By: fresh.Last, Total: countChanges(p), Differences: diffs}
	}
	if opts.Replanned == nil || fresh.Diagnostics.HasErrors() {
		return &StalePlanError{Stack: p.Stack, Differences: diffs, Replan: opts.Replanned != nil}
	}
	fresh.Diagnostics = p.Diagnostics
	opts.Replanned(fresh)
	*p = *fresh
	return nil
}

// recordMissing adds to the inventory those of refs that exist (labelled
// with the stack) and it lacks.
func recordMissing(ctx context.Context, client dynamic.Interface, inv inventory.Store, stack string, refs []objects.Ref, w plan.Writer) error {
	live, err := existing(ctx, client, stack, refs)
	if err != nil {
		return err
	}
	var out []objects.Ref
	for _, r := range refs {
		if _, ok := live[r.Key()]; ok {
			out = append(out, r)
		}
	}
	return inv.AddMissing(ctx, stack, out, w)
}

// existing returns those of refs that exist, labelled with the stack (or
// any, for kinds gpuslice only releases): one list per kind.
func existing(ctx context.Context, client dynamic.Interface, stack string, refs []objects.Ref) (map[string]*unstructured.Unstructured, error) {
	byKind := map[string][]objects.Ref{}
	for _, r := range refs {
		byKind[r.Group+"/"+r.Kind] = append(byKind[r.Group+"/"+r.Kind], r)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, refs := range byKind {
		k, err := objects.KindOf(refs[0].Group, refs[0].Kind)
		if err != nil {
			continue // not a kind this gpuslice manages
		}
		selector := objects.LabelStack + "=" + stack
		if k.Release {
			selector = ""
		}
		list, err := client.Resource(k.GVR).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return out, err
		}
		want := map[string]bool{}
		for _, r := range refs {
			want[r.Key()] = true
		}
		for i := range list.Items {
			u := &list.Items[i]
			key := objects.Ref{Group: refs[0].Group, Kind: k.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}.Key()
			if want[key] {
				out[key] = u
			}
		}
	}
	return out, nil
}

// reappeared returns prunes for the objects of p.Gone that exist now,
// labelled with the stack: one list per kind.
func reappeared(ctx context.Context, client dynamic.Interface, p *plan.Plan) ([]plan.Change, error) {
	live, err := existing(ctx, client, p.Stack, p.Gone)
	var out []plan.Change
	for _, r := range p.Gone {
		if u, ok := live[r.Key()]; ok {
			c, err := plan.Prune(r, u)
			if err != nil {
				return out, err
			}
			out = append(out, c)
		}
	}
	return out, err
}

func minus(refs, gone []objects.Ref) []objects.Ref {
	drop := map[string]bool{}
	for _, r := range gone {
		drop[r.Key()] = true
	}
	var out []objects.Ref
	for _, r := range refs {
		if !drop[r.Key()] {
			out = append(out, r)
		}
	}
	return out
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
