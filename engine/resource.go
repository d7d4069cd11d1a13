package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/checks"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// The Terraform provider manages each resource instance as its own stack
// with its own inventory, so plan, apply, prune, drift and ownership work
// exactly as for a whole configuration. What a resource needs from the rest
// of the configuration — the platform's fractions and tenant label, every
// package a quota must set to 0 — it learns from the cluster instead
// (ResourceContext).

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

// LoadResourceContext reads the applied platform settings and packages.
func (e *Engine) LoadResourceContext(ctx context.Context) (ResourceContext, error) {
	var rc ResourceContext
	managed := contract.LabelManagedBy + "=" + contract.ManagedBy
	cms, err := e.Clients.Typed.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{
		LabelSelector: managed, FieldSelector: "metadata.name=" + render.PlatformConfigMap,
	})
	if err != nil && !apierrors.IsForbidden(err) {
		return rc, fmt.Errorf("read the platform settings (ConfigMaps %s): %w", render.PlatformConfigMap, err)
	}
	if err == nil && len(cms.Items) > 0 {
		cm := cms.Items[0]
		p := &spec.Platform{Meta: spec.Meta{Address: "cluster.gpuslice_platform"}, Namespace: cm.Namespace,
			TenantLabel: cm.Data["tenantLabel"], AdmissionPolicies: cm.Data["admissionPolicies"] == "true"}
		for _, f := range strings.Split(cm.Data["fractions"], ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
				p.Fractions = append(p.Fractions, n)
			}
		}
		rc.Platform = p
	}
	classes, err := e.Clients.Typed.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{LabelSelector: managed + "," + contract.LabelPackage})
	if err != nil {
		return rc, fmt.Errorf("read the packages (DeviceClasses labelled %s): %w", contract.LabelPackage, err)
	}
	for i := range classes.Items {
		p, err := render.PackageOf(&classes.Items[i])
		if err != nil {
			continue // not a package this gpuslice can read; its own plan says so
		}
		p.Address = "cluster.gpuslice_package." + p.Name
		rc.Packages = append(rc.Packages, p)
	}
	return rc, nil
}

// ResourceStackName names the stack of one resource instance from its type
// and id, e.g. tf-workload-team-a.ollama. It fits a label value.
func ResourceStackName(resource any) string {
	var name string
	switch r := resource.(type) {
	case *spec.Platform:
		name = "tf-platform-" + r.Namespace
	case *spec.Package:
		name = "tf-package-" + r.Name
	case *spec.Quota:
		name = "tf-quota-" + r.Namespace
	case *spec.Workload:
		name = "tf-workload-" + r.Namespace + "." + r.Name
	default:
		panic(fmt.Sprintf("engine.ResourceStackName: unexpected %T", resource))
	}
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(name))
		name = name[:54] + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return name
}

// ResourceAddress is the address a resource instance's objects are
// annotated with, e.g. gpuslice_workload.team-a/ollama.
func ResourceAddress(resourceType, id string) string { return resourceType + "." + id }

// resourceStack builds the stack that renders and validates one resource:
// the resource itself plus its context (the platform unless it is the
// platform, and every other package), resolved.
func resourceStack(resource any, rc ResourceContext, models tables.GPUModels) *spec.Stack {
	s := &spec.Stack{Name: ResourceStackName(resource)}
	self := ""
	switch r := resource.(type) {
	case *spec.Platform:
		s.Platform = r
	case *spec.Package:
		s.Packages = append(s.Packages, r)
		self = r.Name
	case *spec.Quota:
		s.Quotas = append(s.Quotas, r)
	case *spec.Workload:
		s.Workloads = append(s.Workloads, r)
	}
	if s.Platform == nil {
		s.Platform = rc.Platform
	}
	for _, p := range rc.Packages {
		if p.Name != self {
			s.Packages = append(s.Packages, p)
		}
	}
	s.Resolve(models)
	return s
}

func addressOf(resource any) string {
	switch r := resource.(type) {
	case *spec.Platform:
		return r.Address
	case *spec.Package:
		return r.Address
	case *spec.Quota:
		return r.Address
	case *spec.Workload:
		return r.Address
	}
	return ""
}

// ValidateResource validates one resource in its context and returns its
// own diagnostics. extraPackages are package names known to exist besides
// the context's (e.g. created in the same Terraform run).
func ValidateResource(resource any, rc ResourceContext, models tables.GPUModels, extraPackages ...string) diag.Diagnostics {
	s := resourceStack(resource, rc, models)
	var out diag.Diagnostics
	for _, d := range spec.Validate(s, models, extraPackages...) {
		if d.Address == addressOf(resource) {
			out = append(out, d)
		}
	}
	return out
}

// ResolveResource fills the resource's computed attributes (a package's
// memory and compute share) from the GPU model table.
func ResolveResource(resource any, models tables.GPUModels) {
	if p, ok := resource.(*spec.Package); ok {
		(&spec.Stack{Packages: []*spec.Package{p}}).Resolve(models)
	}
}

// PlanResource renders one resource in its context and plans its own
// objects against the cluster and its stack's inventory.
func (e *Engine) PlanResource(ctx context.Context, resource any, rc ResourceContext, models tables.GPUModels, opts plan.Options) (*plan.Plan, error) {
	s := resourceStack(resource, rc, models)
	all, err := render.Stack(s)
	if err != nil {
		return nil, err
	}
	var own []objects.Object
	for _, o := range all {
		if o.Address == addressOf(resource) {
			own = append(own, o)
		}
	}
	return e.planObjects(ctx, s.Name, own, opts)
}

// PlanResourceDestroy plans removing everything one resource applied.
func (e *Engine) PlanResourceDestroy(ctx context.Context, resource any) (*plan.Plan, error) {
	return e.PlanDestroy(ctx, ResourceStackName(resource))
}

// ResourceStatus diagnoses one workload.
func (e *Engine) ResourceStatus(ctx context.Context, w *spec.Workload) (status.Status, error) {
	st, err := e.Status(ctx, &spec.Stack{Workloads: []*spec.Workload{w}})
	if err != nil {
		return status.Status{}, err
	}
	return st[w.Address], nil
}

// CheckResource runs the plan-time checks on one resource in its context
// and returns its own diagnostics (and the warning when cluster checks were
// skipped). e may be nil when there is no cluster to ask: skipped then says
// why, and only the checks that need no cluster run.
func CheckResource(ctx context.Context, e *Engine, resource any, rc ResourceContext, t *tables.Set, skipped string) diag.Diagnostics {
	s := resourceStack(resource, rc, t.GPUModels)
	var all diag.Diagnostics
	if e != nil {
		all = e.Check(ctx, s)
	} else {
		all = checks.Run(s, t, nil, skipped)
	}
	var out diag.Diagnostics
	for _, d := range all {
		if d.Address == addressOf(resource) || d.Address == "" {
			out = append(out, d)
		}
	}
	return out
}
