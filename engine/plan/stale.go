package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// Writer is an apply as the stack's inventory records it: who, when, and
// from what configuration.
type Writer struct {
	// Who is the writer and its operation, e.g. "alice@laptop (gpuslice
	// apply)".
	Who string
	At  time.Time
	// ConfigTime is when the configuration applied last changed (its
	// files' newest modification); zero when unknown (the provider).
	ConfigTime time.Time
	// Digest identifies the objects the apply wanted (Plan.Digest).
	Digest string
	// Complete is false while the apply runs, and after one that stopped
	// half-way (interrupted, failed, or beaten by another writer).
	Complete bool
}

// DesiredObjects returns the rendered objects the plan was made for.
func (p *Plan) DesiredObjects() []objects.Object {
	var out []objects.Object
	for _, c := range p.Changes {
		if !c.Rendered.None() {
			out = append(out, c.Rendered)
		}
	}
	return out
}

// Digest identifies the objects the plan wants, whatever the cluster
// holds: two plans of one configuration have the same digest.
func (p *Plan) Digest() string {
	objs := p.DesiredObjects()
	sort.Slice(objs, func(i, j int) bool { return objs[i].Ref().Key() < objs[j].Ref().Key() })
	h := sha256.New()
	for _, o := range objs {
		u, err := o.Unstructured()
		if err != nil {
			continue // the plan that rendered it failed on it
		}
		data, _ := json.Marshal(u.Object) // map keys come out sorted
		h.Write(data)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Differences lists how fresh, made now for the same objects, differs
// from p: what another writer (or a hand) changed in between. Changes the
// API server or controllers make to fields gpuslice does not set (status,
// resourceVersion) are no difference.
func Differences(p, fresh *Plan) []string {
	var out []string
	if p.InventoryVersion != fresh.InventoryVersion {
		by := "another writer"
		if fresh.Last.Who != "" {
			by = fmt.Sprintf("%s at %s", fresh.Last.Who, fresh.Last.At.Local().Format(time.RFC3339))
		} else if fresh.InventoryVersion == "" {
			by = "someone who deleted it"
		}
		out = append(out, "the stack's inventory was written by "+by)
	}
	was := map[string]Change{}
	for _, c := range p.Changes {
		was[c.Ref.Key()] = c
	}
	now := map[string]Change{}
	var keys []string
	for _, c := range fresh.Changes {
		now[c.Ref.Key()] = c
		keys = append(keys, c.Ref.Key())
	}
	for k := range was {
		if _, ok := now[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, inOld := was[k]
		b, inNew := now[k]
		switch {
		case !inNew && (a.Action == Delete || a.Action == Release):
			// Planned to go, and gone: the plan's end state.
		case inOld && inNew && a.Action == Replace && b.Action == Create:
			// The old object finished being deleted (a replacement's
			// foreground deletion, the garbage collector): creating it is
			// what the replacement would have done.
		case !inNew:
			out = append(out, fmt.Sprintf("%s: planned to %s, now nothing to do (it is gone)", a.Ref, a.Action))
		case !inOld:
			out = append(out, fmt.Sprintf("%s: now to %s, not in the plan", b.Ref, b.Action))
		case a.Action != b.Action:
			out = append(out, fmt.Sprintf("%s: planned to %s, now to %s", a.Ref, a.Action, b.Action))
		case !sameFields(a.Fields, b.Fields):
			out = append(out, fmt.Sprintf("%s: fields changed since the plan (now %s)", a.Ref, fieldPaths(b.Fields)))
		}
	}
	seen := map[string]bool{}
	for _, d := range p.Diagnostics {
		seen[d.Error()] = true
	}
	for _, d := range fresh.Diagnostics {
		if !seen[d.Error()] {
			out = append(out, d.Error())
		}
	}
	return out
}

func sameFields(a, b []FieldChange) bool {
	if len(a) != len(b) {
		return false
	}
	// Compared as JSON: live values come back as int64 or float64 alike.
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return reflect.DeepEqual(ja, jb)
}

func fieldPaths(fs []FieldChange) string {
	if len(fs) == 0 {
		return "no field to change"
	}
	s := ""
	for i, f := range fs {
		if i > 0 {
			s += ", "
		}
		s += f.Path
	}
	return s
}
