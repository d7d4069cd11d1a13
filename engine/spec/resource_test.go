package spec_test

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Each Terraform resource instance has its own stack: the name is a valid
// label value, stable, and different for different instances, long names
// included.
func TestResourceStackName(t *testing.T) {
	long := strings.Repeat("n", 63)
	names := map[string]spec.Resource{
		"tf-workload-a-b.c":  &spec.Workload{Namespace: "a-b", Name: "c"},
		"tf-workload-a.b-c":  &spec.Workload{Namespace: "a", Name: "b-c"},
		"tf-package-v100":    &spec.Package{Name: "v100"},
		"tf-quota-team-a":    &spec.Quota{Namespace: "team-a"},
		"tf-platform-system": &spec.Platform{Namespace: "system"},
	}
	for want, r := range names {
		if got := r.StackName(); got != want {
			t.Errorf("StackName(%+v) = %q, want %q", r, got, want)
		}
	}
	a := (&spec.Workload{Namespace: long, Name: strings.Repeat("x", 45)}).StackName()
	b := (&spec.Workload{Namespace: long, Name: strings.Repeat("y", 45)}).StackName()
	for _, n := range []string{a, b} {
		if errs := validation.IsValidLabelValue(n); len(errs) > 0 {
			t.Errorf("%q is not a label value: %v", n, errs)
		}
	}
	if a == b || a != (&spec.Workload{Namespace: long, Name: strings.Repeat("x", 45)}).StackName() {
		t.Errorf("long names must stay distinct and stable: %q, %q", a, b)
	}
}

// The import ID is the resource identity's attributes joined by "/", in
// the order the schema declares them, so import by ID and by identity name
// the same instance.
func TestIDFollowsIdentity(t *testing.T) {
	cases := []struct {
		def   schema.Resource
		r     spec.Resource
		attrs map[string]string
	}{
		{schema.Platform, &spec.Platform{Namespace: "gpuslice-system"}, map[string]string{"namespace": "gpuslice-system"}},
		{schema.Package, &spec.Package{Name: "v100-8gi"}, map[string]string{"name": "v100-8gi"}},
		{schema.Quota, &spec.Quota{Namespace: "team-a"}, map[string]string{"namespace": "team-a"}},
		{schema.Workload, &spec.Workload{Namespace: "team-a", Name: "ollama"}, map[string]string{"namespace": "team-a", "name": "ollama"}},
	}
	for _, c := range cases {
		var parts []string
		for _, name := range c.def.Identity {
			if _, ok := c.def.Attribute(name); !ok {
				t.Errorf("%s: identity attribute %s is not in the schema", c.def.Type, name)
			}
			parts = append(parts, c.attrs[name])
		}
		if got, want := c.r.ID(), strings.Join(parts, "/"); got != want {
			t.Errorf("%s: ID() = %q, identity %v gives %q", c.def.Type, got, c.def.Identity, want)
		}
	}
}

// Planned attributes are computed attributes of the resource's schema:
// what a configuration can refer to before apply.
func TestPlannedAttributes(t *testing.T) {
	w := &spec.Workload{Namespace: "team-a", Name: "ollama", Expose: &spec.Expose{Port: 11434}}
	pkg := &spec.Package{Name: "v100-8gi", MemoryBytes: 8 << 30, Memory: "8Gi", ComputeShare: 25}
	cases := []struct {
		def  schema.Resource
		r    spec.Resource
		want map[string]cty.Value
	}{
		{schema.Workload, w, map[string]cty.Value{"id": cty.StringVal("team-a/ollama"), "service_address": cty.StringVal("ollama.team-a.svc:11434")}},
		{schema.Workload, &spec.Workload{Namespace: "a", Name: "b"}, map[string]cty.Value{"id": cty.StringVal("a/b"), "service_address": cty.StringVal("")}},
		{schema.Package, pkg, map[string]cty.Value{"id": cty.StringVal("v100-8gi"), "memory_bytes": cty.NumberIntVal(8 << 30), "memory": cty.StringVal("8Gi"), "compute_share": cty.NumberIntVal(25)}},
		// An unknown GPU model leaves the slice size unknown, not zero.
		{schema.Package, &spec.Package{Name: "x"}, map[string]cty.Value{"id": cty.StringVal("x")}},
		{schema.Quota, &spec.Quota{Namespace: "team-a"}, map[string]cty.Value{"id": cty.StringVal("team-a")}},
		{schema.Platform, &spec.Platform{Namespace: "gs"}, map[string]cty.Value{"id": cty.StringVal("gs")}},
	}
	for _, c := range cases {
		got := c.r.PlannedAttributes()
		if len(got) != len(c.want) {
			t.Errorf("%s: PlannedAttributes() = %v, want %v", c.def.Type, got, c.want)
		}
		for name, v := range c.want {
			a, ok := c.def.Attribute(name)
			switch {
			case !ok || !a.Computed && !a.Inferred:
				t.Errorf("%s: %s is neither computed nor inferred", c.def.Type, name)
			case !got[name].RawEquals(v):
				t.Errorf("%s: %s = %#v, want %#v", c.def.Type, name, got[name], v)
			}
		}
	}
}

// A stack holds one platform: the second one to add itself is refused,
// naming the first.
func TestAddToOnePlatform(t *testing.T) {
	s := &spec.Stack{}
	first := &spec.Platform{Meta: spec.Meta{Address: "gpuslice_platform.a"}}
	if err := first.AddTo(s); err != nil {
		t.Fatal(err)
	}
	err := (&spec.Platform{Meta: spec.Meta{Address: "gpuslice_platform.b"}}).AddTo(s)
	if err == nil || !strings.Contains(err.Error(), "gpuslice_platform.a") {
		t.Errorf("second platform: err %v, want one naming gpuslice_platform.a", err)
	}
	if s.Platform != first {
		t.Errorf("the first platform must stay")
	}
}
