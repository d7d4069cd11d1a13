// Package plan compares rendered objects with the live cluster and says
// what apply would do: create, update (field by field), replace (when an
// immutable field changes), delete or release (objects removed from the
// configuration, found through the stack's inventory). It reads the cluster
// through a Reader (the engine's view), never one request per object.
package plan

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// Action is what apply does to one object.
type Action string

const (
	NoOp    Action = "no-op"
	Create  Action = "create"
	Update  Action = "update"
	Replace Action = "replace"
	Delete  Action = "delete"
	// Release gives up gpuslice's fields on an object it does not delete
	// (a tenant namespace keeps existing; gpuslice's labels go).
	Release Action = "release"
)

// Change is the planned action on one object.
type Change struct {
	Action  Action        `json:"action"`
	Ref     objects.Ref   `json:"object"`
	Address string        `json:"address"`
	Fields  []FieldChange `json:"fields,omitempty"`
	// Reason explains a replace.
	Reason string `json:"reason,omitempty"`

	// Desired is what apply sends, and Live what the cluster held, for a
	// change that does something; a no-op keeps neither, only Rendered
	// (nothing for an object removed from the configuration). Live is the
	// object as read (a client-go type, or unstructured; decoded for this
	// change when the reader holds it encoded): read it, never change it.
	Desired  *unstructured.Unstructured `json:"-"`
	Live     runtime.Object             `json:"-"`
	Rendered objects.Object             `json:"-"`
}

// DesiredObject is Desired, converted from Rendered for a no-op; nil for
// an object removed from the configuration.
func (c Change) DesiredObject() (*unstructured.Unstructured, error) {
	if c.Desired != nil || c.Rendered.None() {
		return c.Desired, nil
	}
	return c.Rendered.Unstructured()
}

// Plan is everything apply would do for a stack.
type Plan struct {
	Stack   string   `json:"stack"`
	Changes []Change `json:"changes"`
	// Applied is the inventory before this plan; Desired the objects after.
	Applied []objects.Ref `json:"-"`
	Desired []objects.Ref `json:"-"`
	// Diagnostics are problems found while planning (e.g. an object in the
	// way that gpuslice does not own).
	Diagnostics diag.Diagnostics `json:"-"`

	// InventoryVersion is the version of the inventory the plan was made
	// against ("" when the stack had none): apply records its own only if
	// the inventory is still at it. Last is who wrote that inventory.
	InventoryVersion string `json:"-"`
	Last             Writer `json:"-"`
	// Gone are inventory objects that did not exist when planning: apply
	// drops them from the inventory unless they appeared meanwhile.
	Gone []objects.Ref `json:"-"`
	// Options are those the plan was made with, to plan again alike.
	Options Options `json:"-"`
}

// HasChanges reports whether applying would change anything.
func (p *Plan) HasChanges() bool {
	for _, c := range p.Changes {
		if c.Action != NoOp {
			return true
		}
	}
	return false
}

// Count returns how many changes have the action.
func (p *Plan) Count(a Action) int {
	n := 0
	for _, c := range p.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// Options configure Make.
type Options struct {
	// Adopt lets the stack take over objects in its way that no gpuslice
	// stack owns, instead of refusing.
	Adopt bool
}

// Make plans desired (rendered objects of stack) against the cluster.
// applied is the stack's inventory from its last apply.
func Make(ctx context.Context, r Reader, stack string, desired []objects.Object, applied []objects.Ref, opts Options) (*Plan, error) {
	p := &Plan{Stack: stack, Applied: applied, Options: opts}
	live, err := readLive(ctx, r, desired, applied)
	if err != nil {
		return nil, err
	}
	// The schemas of the objects to compare, fetched together.
	var gvs []schema.GroupVersion
	for _, o := range desired {
		if gv := o.GroupVersionKind().GroupVersion(); live[o.Ref().Key()] != nil && !slices.Contains(gvs, gv) {
			gvs = append(gvs, gv)
		}
	}
	r.WarmTypes(gvs...)
	inInventory := map[string]bool{}
	for _, r := range applied {
		inInventory[r.Key()] = true
	}
	changes := make([]Change, len(desired))
	found := make([]*diag.Diagnostic, len(desired))
	err = eachIndex(ctx, len(desired), func(i int) error {
		var err error
		changes[i], found[i], err = compare(ctx, r, stack, desired[i], live[desired[i].Ref().Key()], inInventory[desired[i].Ref().Key()], opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	wanted := map[string]bool{}
	for i, o := range desired {
		wanted[o.Ref().Key()] = true
		p.Desired = append(p.Desired, o.Ref())
		if found[i] != nil {
			p.Diagnostics = append(p.Diagnostics, *found[i])
		}
	}
	p.Changes = changes
	for _, ref := range applied {
		if wanted[ref.Key()] {
			continue
		}
		l, exists := live[ref.Key()]
		if !exists {
			p.Gone = append(p.Gone, ref) // already gone; the next inventory drops it
			continue
		}
		c, err := Prune(ref, l)
		if err != nil {
			return nil, fmt.Errorf("inventory of stack %s: %w", stack, err)
		}
		p.Changes = append(p.Changes, c)
	}
	sort.SliceStable(p.Changes, func(i, j int) bool {
		if p.Changes[i].Address != p.Changes[j].Address {
			return p.Changes[i].Address < p.Changes[j].Address
		}
		return p.Changes[i].Ref.Key() < p.Changes[j].Ref.Key()
	})
	return p, nil
}

// compare plans one desired object against its live one (nil when none).
// A change that does nothing keeps no copy of either: a plan of thousands
// of unchanged objects holds only the rendered objects and the view's.
func compare(ctx context.Context, r Reader, stack string, o objects.Object, live runtime.Object, inInventory bool, opts Options) (Change, *diag.Diagnostic, error) {
	ref := o.Ref()
	c := Change{Ref: ref, Address: o.Address, Rendered: o}
	desired, err := o.Unstructured()
	if err != nil {
		return c, nil, err
	}
	if live == nil {
		c.Action, c.Desired = Create, desired
		return c, nil, nil
	}
	live, err = objects.Decoded(live)
	if err != nil {
		return c, nil, fmt.Errorf("plan %s: %w", o.Address, err)
	}
	d := ownership(stack, o, live, inInventory, opts.Adopt)
	c.Desired = leaveReplicas(desired)
	types, err := r.Types(ctx, o.GroupVersionKind())
	if err != nil {
		return c, d, fmt.Errorf("plan %s: %w", ref, err)
	}
	fields, err := Diff(c.Desired, live, types)
	if err != nil {
		return c, d, fmt.Errorf("plan %s: %w", o.Address, err)
	}
	c.Fields = withoutReplicas(c.Desired, fields)
	if len(c.Fields) == 0 {
		c.Action, c.Desired = NoOp, nil
		return c, d, nil
	}
	c.Action = Update
	if reason := immutableChange(o.Kind(), c.Fields); reason != "" {
		c.Action, c.Reason = Replace, reason
		c.Desired = desired // created again, so with its initial count
	}
	c.Live = live
	return c, d, nil
}

// eachIndex runs f for 0..n-1 on as many goroutines as the process may
// run at once; the first error stops the rest.
func eachIndex(ctx context.Context, n int, f func(i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(goruntime.GOMAXPROCS(0))
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}

// Prune is the change that removes live, an object of the stack the
// configuration no longer has: delete it, or release it when gpuslice
// only adds to it (namespaces).
func Prune(ref objects.Ref, live runtime.Object) (Change, error) {
	kind, err := objects.KindOf(ref.Group, ref.Kind)
	if err != nil {
		return Change{}, err
	}
	live, err = objects.Decoded(live)
	if err != nil {
		return Change{}, fmt.Errorf("plan the removal of %s: %w", ref, err)
	}
	m, err := meta.Accessor(live)
	if err != nil {
		return Change{}, fmt.Errorf("plan the removal of %s: %w", ref, err)
	}
	action, reason := Delete, ""
	if kind.Release {
		action = Release
	}
	// A model volume outlives its workload (its models took hours to
	// download) unless the configuration said to delete it.
	if ref.Group == "" && ref.Kind == "PersistentVolumeClaim" && m.GetAnnotations()[objects.AnnotationOnDestroy] != "delete" {
		action, reason = Release, KeptVolume
	}
	return Change{Action: action, Ref: ref, Address: m.GetAnnotations()[objects.AnnotationAddress], Live: live, Reason: reason}, nil
}

// KeptVolume is the reason a model volume is released, not deleted.
const KeptVolume = "model volume kept with its models for the workload's next creation; model_volume.delete_on_destroy = true deletes it"

// ownership refuses to take over an object that is not the stack's:
// another stack's, or one gpuslice never created (unless adopting).
// Namespaces are shared by design: gpuslice only adds labels to them.
func ownership(stack string, o objects.Object, live runtime.Object, inInventory, adopt bool) *diag.Diagnostic {
	if o.Kind().Release || inInventory {
		return nil
	}
	m, err := meta.Accessor(live)
	if err != nil {
		d := diag.Errorf(o.Address, "", "Unreadable object", "%s: %v; this is a bug in gpuslice", o.Ref(), err)
		return &d
	}
	labels := m.GetLabels()
	owner := labels[objects.LabelStack]
	ref := o.Ref()
	switch {
	case owner == stack:
		return nil
	case owner == "" && m.GetAnnotations()[objects.AnnotationKeptFor] == o.Address:
		return nil // a model volume kept when its workload went: take it back
	case labels[contract.LabelManagedBy] == contract.ManagedBy && owner != "":
		d := diag.Errorf(o.Address, "", "Object owned by another stack",
			"%s already exists and belongs to gpuslice stack %q; rename this resource, or remove it from that stack first", ref, owner)
		return &d
	case adopt:
		return nil
	default:
		d := diag.Errorf(o.Address, "", "Object in the way",
			"%s already exists and was not created by gpuslice; delete it, rename this resource, or adopt it with -adopt (gpuslice then owns and may delete it)", ref)
		return &d
	}
}

// immutableChange returns why a change needs the object replaced, or "".
func immutableChange(k objects.Kind, fields []FieldChange) string {
	for _, f := range fields {
		for _, imm := range k.Immutable {
			prefix := "." + strings.Join(imm, ".")
			if f.Path == prefix || strings.HasPrefix(f.Path, prefix+".") || strings.HasPrefix(f.Path, prefix+"[") {
				return fmt.Sprintf("%s of a %s cannot be changed in place", prefix, k.Kind)
			}
		}
	}
	return ""
}

// Reader finds the live object a Ref names; nil when none exists. The
// engine's view of the cluster is one: it answers from its informers, and
// asks the API server only for objects gpuslice has not labelled (one in
// the way), so a steady-state plan sends no request at all.
type Reader interface {
	// Object is the live object as the reader holds it, shared: plan
	// never changes it, and copies it only into the changes it keeps. It
	// may be objects.Encoded: plan decodes it when it compares.
	Object(ctx context.Context, ref objects.Ref) (runtime.Object, error)
	// WarmKinds starts reading the kinds at once, before Object asks one
	// by one.
	WarmKinds(kinds ...objects.Kind)
	// Types is the API server's schema of a kind, which Diff compares
	// with; WarmTypes starts fetching those of group-versions at once.
	Types(ctx context.Context, gvk schema.GroupVersionKind) (managedfields.TypeConverter, error)
	WarmTypes(gvs ...schema.GroupVersion)
}

// readLive finds the live objects for the desired objects and the
// inventory.
func readLive(ctx context.Context, r Reader, desired []objects.Object, applied []objects.Ref) (map[string]runtime.Object, error) {
	var wanted []objects.Ref
	for _, o := range desired {
		wanted = append(wanted, o.Ref())
	}
	wanted = append(wanted, applied...)
	var kinds []objects.Kind
	seen := map[string]bool{}
	for _, ref := range wanted {
		k, err := objects.KindOf(ref.Group, ref.Kind)
		if err != nil {
			return nil, err
		}
		if !seen[k.GVR.String()] {
			seen[k.GVR.String()] = true
			kinds = append(kinds, k)
		}
	}
	r.WarmKinds(kinds...)
	live := make(map[string]runtime.Object, len(wanted))
	for _, ref := range wanted {
		if _, done := live[ref.Key()]; done {
			continue
		}
		o, err := r.Object(ctx, ref)
		if err != nil {
			return nil, err
		}
		if o != nil {
			live[ref.Key()] = o
		}
	}
	return live, nil
}
