// Package plan compares rendered objects with the live cluster and says
// what apply would do: create, update (field by field), replace (when an
// immutable field changes), delete or release (objects removed from the
// configuration, found through the stack's inventory). It reads the cluster
// with one list per kind (plus one per kind and namespace where objects
// are missing), never one request per object.
package plan

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

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

	Desired *unstructured.Unstructured `json:"-"`
	Live    *unstructured.Unstructured `json:"-"`
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
func Make(ctx context.Context, client dynamic.Interface, stack string, desired []objects.Object, applied []objects.Ref, opts Options) (*Plan, error) {
	p := &Plan{Stack: stack, Applied: applied}
	live, err := readLive(ctx, client, stack, desired, applied)
	if err != nil {
		return nil, err
	}
	inInventory := map[string]bool{}
	for _, r := range applied {
		inInventory[r.Key()] = true
	}
	wanted := map[string]bool{}
	for _, o := range desired {
		ref := o.Ref()
		wanted[ref.Key()] = true
		p.Desired = append(p.Desired, ref)
		c := Change{Ref: ref, Address: o.Address, Desired: o.Obj}
		l, exists := live[ref.Key()]
		switch {
		case !exists:
			c.Action = Create
		default:
			c.Live = l
			if d := ownership(stack, o, l, inInventory[ref.Key()], opts.Adopt); d != nil {
				p.Diagnostics = append(p.Diagnostics, *d)
			}
			c.Fields = Diff(o.Obj, l)
			c.Action = NoOp
			if len(c.Fields) > 0 {
				c.Action = Update
				if reason := immutableChange(o.Kind(), c.Fields); reason != "" {
					c.Action, c.Reason = Replace, reason
				}
			}
		}
		p.Changes = append(p.Changes, c)
	}
	for _, ref := range applied {
		if wanted[ref.Key()] {
			continue
		}
		l, exists := live[ref.Key()]
		if !exists {
			continue // already gone; the next inventory drops it
		}
		kind, err := objects.KindOf(ref.Group, ref.Kind)
		if err != nil {
			return nil, fmt.Errorf("inventory of stack %s: %w", stack, err)
		}
		action := Delete
		if kind.Release {
			action = Release
		}
		p.Changes = append(p.Changes, Change{Action: action, Ref: ref, Address: l.GetAnnotations()[objects.AnnotationAddress], Live: l})
	}
	sort.SliceStable(p.Changes, func(i, j int) bool {
		if p.Changes[i].Address != p.Changes[j].Address {
			return p.Changes[i].Address < p.Changes[j].Address
		}
		return p.Changes[i].Ref.Key() < p.Changes[j].Ref.Key()
	})
	return p, nil
}

// ownership refuses to take over an object that is not the stack's:
// another stack's, or one gpuslice never created (unless adopting).
// Namespaces are shared by design: gpuslice only adds labels to them.
func ownership(stack string, o objects.Object, live *unstructured.Unstructured, inInventory, adopt bool) *diag.Diagnostic {
	if o.Kind().Release || inInventory {
		return nil
	}
	labels := live.GetLabels()
	owner := labels[objects.LabelStack]
	ref := o.Ref()
	switch {
	case owner == stack:
		return nil
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

// readLive finds the live objects for the desired objects and the
// inventory. First one list per kind of everything labelled with the stack,
// across namespaces (namespaces themselves are listed whole: gpuslice only
// labels them). Only objects not found that way — to be created, or
// stripped of their labels — need a second look: one list per kind and
// namespace, which finds any object in the way. In a steady state a plan
// costs one request per kind.
func readLive(ctx context.Context, client dynamic.Interface, stack string, desired []objects.Object, applied []objects.Ref) (map[string]*unstructured.Unstructured, error) {
	type scope struct{ group, kind, namespace string }
	var wanted []objects.Ref
	for _, o := range desired {
		wanted = append(wanted, o.Ref())
	}
	wanted = append(wanted, applied...)

	live := map[string]*unstructured.Unstructured{}
	kindsDone := map[scope]bool{}
	for _, r := range wanted {
		k := scope{group: r.Group, kind: r.Kind}
		if kindsDone[k] {
			continue
		}
		kindsDone[k] = true
		kind, err := objects.KindOf(r.Group, r.Kind)
		if err != nil {
			return nil, err
		}
		selector := objects.LabelStack + "=" + stack
		if kind.Release {
			selector = "" // shared objects do not carry the stack label
		}
		if err := listInto(ctx, client, kind, "", selector, live); err != nil {
			if !apierrors.IsForbidden(err) || !kind.Namespaced {
				return nil, err
			}
			// Allowed in some namespaces only: the second pass lists them.
		}
	}
	second := map[scope]bool{}
	for _, r := range wanted {
		if _, found := live[r.Key()]; !found {
			second[scope{r.Group, r.Kind, r.Namespace}] = true
		}
	}
	for s := range second {
		kind, err := objects.KindOf(s.group, s.kind)
		if err != nil {
			return nil, err
		}
		if !kind.Namespaced && kindsDone[scope{group: s.group, kind: s.kind}] && kind.Release {
			continue // already listed whole
		}
		if err := listInto(ctx, client, kind, s.namespace, "", live); err != nil {
			return nil, err
		}
	}
	return live, nil
}

// listInto lists a kind (in namespace, or everywhere when empty) and
// indexes the items by Ref key.
func listInto(ctx context.Context, client dynamic.Interface, kind objects.Kind, namespace, selector string, live map[string]*unstructured.Unstructured) error {
	var list *unstructured.UnstructuredList
	var err error
	opts := metav1.ListOptions{LabelSelector: selector}
	if kind.Namespaced && namespace != "" {
		list, err = client.Resource(kind.GVR).Namespace(namespace).List(ctx, opts)
	} else {
		list, err = client.Resource(kind.GVR).List(ctx, opts)
	}
	if err != nil {
		where := namespace
		if where == "" {
			where = "the cluster"
		}
		return fmt.Errorf("list %s in %s: %w", kind.GVR.Resource, where, err)
	}
	for i := range list.Items {
		u := &list.Items[i]
		// List items do not always carry their kind; set it from what was
		// listed so Refs match.
		u.SetAPIVersion(kind.GVR.GroupVersion().String())
		u.SetKind(kind.Kind)
		live[objects.RefOf(u).Key()] = u
	}
	return nil
}
