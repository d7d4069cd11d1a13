package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/internal/checks"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/internal/readback"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// The Terraform provider manages each resource instance as its own stack
// (spec.Resource.StackName) with its own inventory, so plan, apply, prune,
// drift and ownership work exactly as for a whole configuration. What a
// resource needs from the rest of the configuration — the platform's
// fractions and tenant label, every package a quota must set to 0 — it
// learns from the cluster instead (ResourceContext).

// ResourceContext is what the cluster says about the resources around one
// resource instance.
type ResourceContext struct {
	// Platform is the cluster's gpuslice_platform settings; nil when none
	// is applied (defaults apply).
	Platform *spec.Platform
	// Packages are the packages applied in the cluster (their DeviceClasses).
	Packages []*spec.Package
}

// PackageNames lists the names of the context's packages.
func (rc ResourceContext) PackageNames() []string {
	var out []string
	for _, p := range rc.Packages {
		out = append(out, p.Name)
	}
	return out
}

// Prefetch starts, without waiting, the cluster-wide reads of a run that
// every resource's read or plan needs: the platform settings and the
// packages (every resource renders with them), the published slices (the
// workloads' checks) and the stacks' inventories. A Terraform run calls it
// once configured, before it knows the configuration's namespaces; what is
// read in a namespace starts with the first resource that needs it there
// (prefetchStack). Terraform plans a workload only after the package
// and quota it names, so its namespace's quotas are listed meanwhile.
func (e *Engine) Prefetch() {
	e.view.Warm(platformConfigMaps, packageClasses)
	e.view.Warm(checks.Reads()...)
	e.view.WarmIn([]string{e.Inventory.Namespace}, inventoryConfigMaps)
	// Not the schemas plan compares with: only the group-versions a plan
	// compares are fetched, when it first does (plan.Make warms them).
}

// What LoadResourceContext reads: the platform settings and the packages;
// and the inventories.
var (
	platformConfigMaps  = view.PlatformConfigMaps
	packageClasses      = view.ManagedKind("resource.k8s.io", "DeviceClass")
	inventoryConfigMaps = view.ManagedKind("", "ConfigMap")
)

// prefetchStack starts, without waiting, the informers of what reading
// back, checking, planning and diagnosing the stack's quotas and
// workloads read in their namespaces: the kinds each resource renders or
// checks with, not every kind gpuslice may read there, so a namespace
// pays one read per kind its resources have. A quota's namespace is read
// by name too (the quota labels it). In a Terraform run the first
// resource of a kind in a namespace starts its informer, and the
// resources after it find it listed.
func (e *Engine) prefetchStack(s *spec.Stack) {
	for _, q := range s.Quotas {
		e.view.WarmIn([]string{q.Namespace}, append(readback.QuotaReads(q), view.NamespaceNamed(q.Namespace))...)
	}
	for _, w := range s.Workloads {
		e.view.WarmIn([]string{w.Namespace}, workloadReads(w)...)
	}
}

// workloadReads are what a workload's readback, plan, checks and status
// read in its namespace.
func workloadReads(w *spec.Workload) []view.Resource {
	out := append(readback.WorkloadReads(w), claimTemplates)
	out = append(out, checks.NamespaceReads(w)...)
	return append(out, status.NamespaceReads(w)...)
}

var claimTemplates = view.ManagedKind("resource.k8s.io", "ResourceClaimTemplate")

// LoadResourceContext reads the applied platform settings and packages
// from the engine's view: every resource of a Terraform run asks, and
// none of them costs a request.
func (e *Engine) LoadResourceContext(ctx context.Context) (ResourceContext, error) {
	var rc ResourceContext
	configMaps, classes := platformConfigMaps, packageClasses
	e.view.Warm(configMaps, classes)
	cms, err := e.view.ByIndex(ctx, configMaps, "", view.IndexName, render.PlatformConfigMap)
	if err != nil && !apierrors.IsForbidden(err) {
		return rc, fmt.Errorf("read the platform settings (ConfigMaps %s): %w", render.PlatformConfigMap, err)
	}
	if len(cms) > 0 {
		sort.Slice(cms, func(i, j int) bool { return namespaceOf(cms[i]) < namespaceOf(cms[j]) })
		cm, err := view.As[corev1.ConfigMap](cms[0])
		if err != nil {
			return rc, err
		}
		p, err := render.PlatformOf(cm)
		if err != nil {
			return rc, err
		}
		p.Address = "cluster.gpuslice_platform"
		rc.Platform = p
	}
	objs, err := e.view.List(ctx, classes)
	if err != nil {
		return rc, fmt.Errorf("read the packages (DeviceClasses labelled %s): %w", contract.LabelPackage, err)
	}
	for _, o := range objs {
		dc, err := view.As[resourcev1.DeviceClass](o)
		if err != nil {
			return rc, err
		}
		if dc.Labels[contract.LabelPackage] == "" {
			continue
		}
		p, err := render.PackageOf(dc)
		if err != nil {
			continue // not a package this gpuslice can read; its own plan says so
		}
		p.Address = "cluster.gpuslice_package." + p.Name
		rc.Packages = append(rc.Packages, p)
	}
	sort.Slice(rc.Packages, func(i, j int) bool { return rc.Packages[i].Name < rc.Packages[j].Name })
	return rc, nil
}

func namespaceOf(obj any) string {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetNamespace()
	}
	return ""
}

// ResourceAddress is the address a resource instance's objects are
// annotated with, e.g. gpuslice_workload.team-a/ollama.
func ResourceAddress(resourceType, id string) string { return resourceType + "." + id }

// resourceStack builds the stack that renders and validates one resource:
// the resource itself plus its context (the platform unless it is the
// platform, and every other package), resolved.
func resourceStack(r spec.Resource, rc ResourceContext, models tables.GPUModels) *spec.Stack {
	s := spec.StackOf(r)
	s.Name = r.StackName()
	if s.Platform == nil {
		s.Platform = rc.Platform
	}
	own := map[string]bool{}
	for _, p := range s.Packages {
		own[p.Name] = true
	}
	for _, p := range rc.Packages {
		if !own[p.Name] {
			s.Packages = append(s.Packages, p)
		}
	}
	s.Resolve(models)
	return s
}

// ValidateResource validates one resource in its context and returns its
// own diagnostics. extraPackages are package names known to exist besides
// the context's (e.g. created in the same Terraform run).
func ValidateResource(r spec.Resource, rc ResourceContext, models tables.GPUModels, extraPackages ...string) diag.Diagnostics {
	s := resourceStack(r, rc, models)
	var out diag.Diagnostics
	for _, d := range spec.Validate(s, models, extraPackages...) {
		if d.Address == r.Addr() {
			out = append(out, d)
		}
	}
	return out
}

// ResolveResource fills the resource's computed attributes (a package's
// memory and compute share) from the GPU model table.
func ResolveResource(r spec.Resource, models tables.GPUModels) {
	spec.StackOf(r).Resolve(models)
}

// PlanResource renders one resource in its context and plans its own
// objects against the cluster and its stack's inventory.
func (e *Engine) PlanResource(ctx context.Context, r spec.Resource, rc ResourceContext, models tables.GPUModels, opts plan.Options) (*plan.Plan, error) {
	e.prefetchStack(spec.StackOf(r))
	s := resourceStack(r, rc, models)
	all, err := render.Stack(s)
	if err != nil {
		return nil, err
	}
	var own []objects.Object
	for _, o := range all {
		if o.Address == r.Addr() {
			own = append(own, o)
		}
	}
	return e.planObjects(ctx, s.Name, own, opts)
}

// PlanResourceDestroy plans removing everything one resource applied.
func (e *Engine) PlanResourceDestroy(ctx context.Context, r spec.Resource) (*plan.Plan, error) {
	return e.planObjects(ctx, r.StackName(), nil, plan.Options{}) // within the provider's run
}

// ResourceStatus diagnoses one resource; ok is false for a resource that
// has no status of its own (anything but a workload).
func (e *Engine) ResourceStatus(ctx context.Context, r spec.Resource) (st status.Status, ok bool, err error) {
	statuses, err := e.Status(ctx, spec.StackOf(r))
	if err != nil {
		return status.Status{}, false, err
	}
	st, ok = statuses[r.Addr()]
	return st, ok, nil
}

// ReadResource reads the resource of type resourceType whose import ID is
// id back from the cluster: nil when it is not applied. prior, when known,
// supplies what the cluster does not record (a workload's wait_for); it
// must be of the same type.
func (e *Engine) ReadResource(ctx context.Context, resourceType, id string, prior spec.Resource) (spec.Resource, error) {
	c := e.view
	was := &spec.Stack{}
	if prior != nil {
		was = spec.StackOf(prior)
	}
	switch resourceType {
	case schema.Platform.Type:
		p, err := readback.Platform(ctx, c, id, was.Platform)
		if p == nil {
			return nil, err
		}
		return p, err
	case schema.Package.Type:
		p, err := readback.Package(ctx, c, id)
		if p == nil {
			return nil, err
		}
		return p, err
	case schema.Quota.Type:
		e.prefetchStack(was)
		q, err := readback.Quota(ctx, c, id, first(was.Quotas))
		if q == nil {
			return nil, err
		}
		return q, err
	case schema.Workload.Type:
		ns, name, ok := strings.Cut(id, "/")
		if !ok {
			return nil, fmt.Errorf("id %q is not <namespace>/<name>; import the workload again with such an ID", id)
		}
		e.prefetchStack(was)
		w, err := readback.Workload(ctx, c, ns, name, first(was.Workloads))
		if w == nil {
			return nil, err
		}
		return w, err
	}
	return nil, fmt.Errorf("%s is not a gpuslice resource type; this is a bug in the caller", resourceType)
}

func first[T any](xs []*T) *T {
	if len(xs) == 0 {
		return nil
	}
	return xs[0]
}

// CheckResource runs the plan-time checks on one resource in its context
// and returns its own diagnostics (and the warning when cluster checks were
// skipped). e may be nil when there is no cluster to ask: skipped then says
// why, and only the checks that need no cluster run.
func CheckResource(ctx context.Context, e *Engine, r spec.Resource, rc ResourceContext, t *tables.Set, skipped string) diag.Diagnostics {
	s := resourceStack(r, rc, t.GPUModels)
	var all diag.Diagnostics
	if e != nil {
		all = e.Check(ctx, s)
	} else {
		all = checks.Run(s, t, nil, skipped)
	}
	var out diag.Diagnostics
	for _, d := range all {
		if d.Address == r.Addr() || d.Address == "" {
			out = append(out, d)
		}
	}
	return out
}
