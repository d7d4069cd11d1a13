// Package engine is the front door for the CLI and the Terraform provider:
// plan a stack or one resource against a cluster, apply or destroy it,
// wait for its workloads, diagnose them, read resources back and report
// the cluster's GPUs. The subpackages do the work — spec (the typed
// resources and their validation), config (decoding a resource's values),
// hclstack (the CLI's .tf evaluator), render, plan, apply, status,
// capacity, and under internal/ the plan-time checks, readback, inventory
// and object plumbing only the engine uses; this package wires them to one
// set of clients. It is the only code that talks to the API server to
// provision.
package engine

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/internal/checks"
	"github.com/gpuslice/gpuslice/engine/internal/inventory"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/kube"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// Engine talks to one cluster. Its reads share one view of the cluster
// (client-go informers started on first use, kept current by watches; see
// engine/internal/view): a Terraform run or a CLI command lists each kind
// once however many resources it plans, and what the engine writes is what
// it reads next. Use one Engine per run and Close it.
type Engine struct {
	Clients   *kube.Clients
	Inventory inventory.Store
	// Tables are the data tables the plan-time checks read.
	Tables *tables.Set
	// Continuous keeps one view across Plan calls, for a loop that plans
	// again and again (gpuslice reconcile): the view watches, and a round
	// reads what the watches have delivered, so a change someone made
	// moments before it may show only in the next round. Otherwise every
	// Plan and PlanDestroy starts a run and lists the cluster afresh (as
	// many lists as kinds, whatever the stack's size): nothing changed
	// since the last run can be hidden. Such a run opens watches only once
	// it writes or waits.
	Continuous bool
	view       *view.View
	// begun is the stack whose run Begin started, which its next plan
	// continues ("" for none).
	begunMu sync.Mutex
	begun   string

	// whether the API server has DRAConsumableCapacity on (features.go)
	featureOnce sync.Once
	consumable  *bool
}

// New connects to the cluster of cfg. inventoryNamespace holds the stacks'
// inventories ("" means gpuslice-system).
func New(cfg *rest.Config, inventoryNamespace string) (*Engine, error) {
	clients, err := kube.NewClients(cfg)
	if err != nil {
		return nil, err
	}
	if inventoryNamespace == "" {
		inventoryNamespace = inventory.DefaultNamespace
	}
	v := view.New(clients.Dynamic, clients.Config)
	clients.OnWrite(v.Observe)
	inv := inventory.Store{Client: clients.Typed, Namespace: inventoryNamespace,
		Reader: func(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
			obj, err := v.Get(ctx, view.ManagedKind("", "ConfigMap"), ns, name)
			if err != nil {
				return nil, err
			}
			return view.As[corev1.ConfigMap](obj)
		}}
	return &Engine{Clients: clients, Inventory: inv, Tables: tables.Builtin(), view: v}, nil
}

// Close stops the engine's watches. A closed engine cannot read.
func (e *Engine) Close() { e.view.Close() }

// Refresh starts a new run: the next reads list the cluster afresh, as a
// new process would. The engine's own writes never need it. Changes made
// by others are certain to be seen after Refresh; before it, only once the
// run watches (it has written or waited, or is Continuous), within the
// watch's latency. It must not be called while other reads run.
func (e *Engine) Refresh() { e.view.Reset() }

// Informers says how many informers the engine's view runs: the reads a
// run costs, whatever its size.
func (e *Engine) Informers() int { return e.view.Started() }

// Read is one informer of the engine's view: a resource and where it is
// read.
type Read struct {
	// Resource is the resource and its selectors, e.g. "pods labelled
	// gpuslice.dev/workload".
	Resource string
	// Kind is the resource's kind; Namespaced whether it lives in
	// namespaces.
	Kind       string
	Namespaced bool
	// Namespace is where it is read: "" for every namespace (or a
	// cluster-scoped kind).
	Namespace string
	// Fields is its field selector.
	Fields string
}

func (r Read) String() string {
	if r.Namespace != "" {
		return r.Resource + " in " + r.Namespace
	}
	if r.Namespaced {
		return r.Resource + " in every namespace"
	}
	return r.Resource
}

// Reads lists the informers the engine's view runs: what a run has read.
func (e *Engine) Reads() []Read {
	var out []Read
	for _, i := range e.view.Informers() {
		out = append(out, Read{Resource: i.Resource.String(), Kind: i.Resource.Kind, Namespaced: i.Resource.Namespaced,
			Namespace: i.Namespace, Fields: i.Resource.Fields})
	}
	return out
}

// Plan renders the stack, compares it with the cluster and runs the
// plan-time checks; their errors stop apply like any other.
func (e *Engine) Plan(ctx context.Context, s *spec.Stack, opts plan.Options) (*plan.Plan, error) {
	e.runFor(s.Name)
	e.prefetchStack(s)
	objs, err := render.Stack(s)
	if err != nil {
		return nil, err
	}
	p, err := e.planObjects(ctx, s.Name, objs, opts)
	if err != nil {
		return nil, err
	}
	p.Diagnostics = append(p.Diagnostics, e.Check(ctx, s)...)
	return p, nil
}

// Check runs the plan-time checks with what the cluster says now. When the
// cluster cannot be asked, the checks that need it are skipped with a
// warning saying why.
func (e *Engine) Check(ctx context.Context, s *spec.Stack) diag.Diagnostics {
	e.prefetchStack(s)
	t := e.Tables
	if t == nil {
		t = tables.Builtin()
	}
	facts, err := checks.Gather(ctx, e.view, s)
	if err != nil {
		return checks.Run(s, t, nil, fmt.Sprintf("reading the cluster failed (%v)", err))
	}
	if s.UsesKEDA() {
		facts.KEDA = e.served(render.KEDAAPIVersion, render.KEDAKind)
	}
	if s.UsesPyTorchJob() {
		facts.PyTorchJob = e.served(render.PyTorchJobAPIVersion, render.PyTorchJobKind)
	}
	if s.HasSharedPackages() || usesSharedPackage(s, facts) {
		facts.ConsumableCapacity = e.consumableCapacity(ctx)
	}
	if s.UsesTrainJob() {
		facts.TrainJob = e.servedAll(render.TrainerAPIVersion, render.TrainJobKind, render.TrainingRuntimeKind)
	}
	return checks.Run(s, t, facts, "")
}

// CheckOffline runs the plan-time checks that need no cluster (image vs
// GPU generation, container RAM, model fit, model storage), as `gpuslice
// validate` does.
func CheckOffline(s *spec.Stack, t *tables.Set) diag.Diagnostics {
	return checks.Run(s, t, nil, "")
}

// PlanDestroy plans removing everything the stack applied.
func (e *Engine) PlanDestroy(ctx context.Context, stack string) (*plan.Plan, error) {
	e.runFor(stack)
	return e.planObjects(ctx, stack, nil, plan.Options{})
}

// startRun lists the cluster afresh at the next reads, unless the engine
// is Continuous, whose view follows the cluster instead. Only the
// stack-wide plans start runs: the provider's per-resource calls run
// concurrently within one run (Configure starts it).
func (e *Engine) startRun() {
	if !e.Continuous {
		e.view.Reset()
		return
	}
	e.view.Follow()
}

func (e *Engine) planObjects(ctx context.Context, stack string, objs []objects.Object, opts plan.Options) (*plan.Plan, error) {
	rec, err := e.Inventory.Read(ctx, stack)
	if err != nil {
		return nil, err
	}
	objs = e.withoutUninstalledKinds(ctx, objs)
	e.warmRefs(objs, rec.Refs)
	p, err := plan.Make(ctx, e.view, stack, objs, rec.Refs, opts)
	if err != nil {
		return nil, err
	}
	p.InventoryVersion, p.Last = rec.Version, rec.Last
	if err := e.guardNodePluginRemoval(ctx, p); err != nil {
		return nil, err
	}
	if err := e.guardNodePluginRollback(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

// warmRefs starts reading, at once, the kinds of the objects a plan
// compares in their namespaces (plan warms the cluster-scoped ones), and
// the namespaces it labels by name.
func (e *Engine) warmRefs(desired []objects.Object, applied []objects.Ref) {
	refs := append([]objects.Ref(nil), applied...)
	for _, o := range desired {
		refs = append(refs, o.Ref())
	}
	for _, ref := range refs {
		k, err := objects.KindOf(ref.Group, ref.Kind)
		switch {
		case err != nil:
		case k.Release:
			e.view.Warm(view.NamespaceNamed(ref.Name))
		case k.Namespaced:
			e.view.WarmIn([]string{ref.Namespace}, view.Managed(k))
		}
	}
}

// Apply carries out a plan. A plan with error diagnostics is refused.
func (e *Engine) Apply(ctx context.Context, p *plan.Plan, opts apply.Options) error {
	if p.Diagnostics.HasErrors() {
		return fmt.Errorf("the plan has errors; fix them first: %w", p.Diagnostics.Err())
	}
	return apply.Run(ctx, e.Clients.Dynamic, e.Inventory, p, e.withReader(opts))
}

// Destroy applies a destroy plan and removes the stack's inventory,
// unless another writer recorded objects in it meanwhile.
func (e *Engine) Destroy(ctx context.Context, p *plan.Plan, opts apply.Options) error {
	if p.Diagnostics.HasErrors() {
		return fmt.Errorf("the destroy plan has errors; fix them first: %w", p.Diagnostics.Err())
	}
	if err := apply.Run(ctx, e.Clients.Dynamic, e.Inventory, p, e.withReader(opts)); err != nil {
		return err
	}
	rec, err := e.Inventory.Read(ctx, p.Stack)
	if err != nil {
		return err
	}
	if len(rec.Refs) > 0 {
		return fmt.Errorf("stack %s: another writer recorded %d objects in the inventory during this destroy; run destroy again to remove them", p.Stack, len(rec.Refs))
	}
	return e.Inventory.Delete(ctx, p.Stack, rec.Version)
}

// Status diagnoses every workload of the stack, keyed by address.
func (e *Engine) Status(ctx context.Context, s *spec.Stack) (map[string]status.Status, error) {
	e.prefetchStack(s)
	snap, err := status.Load(ctx, e.view, s.Workloads)
	if err != nil {
		return nil, err
	}
	out := map[string]status.Status{}
	for _, w := range s.Workloads {
		out[w.Address] = snap.Diagnose(w)
	}
	return out, nil
}

// Changed returns the workloads whose objects the plan creates, updates or
// replaces: the ones apply waits for.
func Changed(s *spec.Stack, p *plan.Plan) []*spec.Workload {
	touched := map[string]bool{}
	for _, c := range p.Changes {
		if c.Action == plan.Create || c.Action == plan.Update || c.Action == plan.Replace {
			touched[c.Address] = true
		}
	}
	var out []*spec.Workload
	for _, w := range s.Workloads {
		if touched[w.Address] && w.WaitFor != spec.WaitNone {
			out = append(out, w)
		}
	}
	return out
}

// WaitError lists the workloads that did not get where they were waited
// for, with their diagnosed status.
type WaitError struct{ Pending map[string]status.Status }

func (e *WaitError) Error() string {
	addrs := make([]string, 0, len(e.Pending))
	for a := range e.Pending {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	msg := "workloads not ready:"
	for _, a := range addrs {
		st := e.Pending[a]
		msg += fmt.Sprintf("\n  %s: %s (%s): %s", a, st.Phase, st.Reason, st.Message)
	}
	return msg
}

// Wait watches until every workload reaches what its wait_for asks (pods
// ready or job complete; or, for "scheduled", every replica on a node with
// its slice), fails beyond waiting (OOMKilled, image pull, crash loop), or
// its timeout passes. progress, when set, hears each change of status.
// Workloads are diagnosed again whenever the view sees a change, never by
// polling lists; concurrent waits (Terraform applies ten resources at once)
// share the same watches.
func (e *Engine) Wait(ctx context.Context, workloads []*spec.Workload, progress func(address string, st status.Status)) (map[string]status.Status, error) {
	deadlines := map[string]time.Time{}
	start := time.Now()
	for _, w := range workloads {
		d, err := time.ParseDuration(w.Timeout)
		if err != nil {
			return nil, fmt.Errorf("%s.timeout: %w", w.Address, err)
		}
		deadlines[w.Address] = start.Add(d)
	}
	changed, stop := e.view.Subscribe()
	defer stop()
	last := map[string]status.Status{}
	// ranOn is where each workload last ran, for a Job that finishes
	// meanwhile (status.Keeping).
	ranOn := map[string]status.RanOn{}
	pending := append([]*spec.Workload(nil), workloads...)
	failed := map[string]status.Status{}
	for len(pending) > 0 {
		snap, err := status.Load(ctx, e.view, pending)
		if err != nil {
			return last, err
		}
		var still []*spec.Workload
		next := time.Time{}
		for _, w := range pending {
			st := snap.Diagnose(w).Keeping(ranOn[w.Address])
			if st.Device != "" {
				ranOn[w.Address] = st.RanOn()
			}
			if prev, ok := last[w.Address]; progress != nil && (!ok || prev.Reason != st.Reason || prev.Message != st.Message) {
				progress(w.Address, st)
			}
			last[w.Address] = st
			switch {
			case reached(w, st):
			case st.Reason.Fatal() || time.Now().After(deadlines[w.Address]):
				if st.Phase == status.Running {
					st.Message += fmt.Sprintf("; the job did not complete within its timeout (%s): raise timeout, or set wait_for = \"scheduled\" to stop waiting once it runs", w.Timeout)
				}
				failed[w.Address] = st
			default:
				still = append(still, w)
				if d := deadlines[w.Address]; next.IsZero() || d.Before(next) {
					next = d
				}
			}
		}
		pending = still
		if len(pending) == 0 {
			break
		}
		timeout := time.NewTimer(time.Until(next) + time.Millisecond)
		select {
		case <-ctx.Done():
			timeout.Stop()
			for _, w := range pending {
				failed[w.Address] = last[w.Address]
			}
			return last, &WaitError{Pending: failed}
		case <-changed:
		case <-timeout.C:
		}
		timeout.Stop()
		// Changes come in bursts (a pod's status, its claim, an event):
		// take them together.
		select {
		case <-ctx.Done():
		case <-time.After(waitSettle):
		}
	}
	if len(failed) > 0 {
		return last, &WaitError{Pending: failed}
	}
	return last, nil
}

// waitSettle gathers a burst of changes into one diagnosis.
const waitSettle = 50 * time.Millisecond

// reached reports whether w got where apply waits for it to get: for a
// Job, ready is complete — its status then stays what apply recorded, so
// a plan after it finishes is empty (a Job's pods running are not yet
// where it is going).
func reached(w *spec.Workload, st status.Status) bool {
	switch {
	case st.Phase == status.Succeeded:
		return true
	case st.Phase == status.Running && w.Kind != spec.KindJob:
		return true
	case w.WaitFor == spec.WaitScheduled:
		return st.Scheduled >= st.Replicas && st.Device != ""
	}
	return false
}

// withReader lets apply's stale-plan check plan again from the view.
func (e *Engine) withReader(opts apply.Options) apply.Options {
	if opts.Reader == nil {
		opts.Reader = e.view
	}
	return opts
}
