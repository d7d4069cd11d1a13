package config_test

import (
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine/config"
	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// quota is a gpuslice_quota value as the provider receives it: every
// argument, computed attributes unknown, extras the schema does not know.
func quota(slices cty.Value) cty.Value {
	vals := map[string]cty.Value{}
	for name, ty := range config.BlockType(schema.Quota.Block).AttributeTypes() {
		vals[name] = cty.NullVal(ty)
	}
	vals["namespace"] = cty.StringVal("team-a")
	vals["slices"] = slices
	vals["id"] = cty.UnknownVal(cty.String)
	vals["timeouts"] = cty.NullVal(cty.Object(map[string]cty.Type{"create": cty.String}))
	return cty.ObjectVal(vals)
}

func TestDecodeResource(t *testing.T) {
	r, ds := config.DecodeResource(schema.Quota, "gpuslice_quota.q", quota(cty.MapVal(map[string]cty.Value{"v100-8gi": cty.NumberIntVal(2)})))
	if ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	q := spec.StackOf(r).Quotas
	if len(q) != 1 || q[0].Namespace != "team-a" || q[0].Slices["v100-8gi"] != 2 || r.Addr() != "gpuslice_quota.q" {
		t.Errorf("decoded %+v", r)
	}

	p, ds := config.DecodeResource(schema.Platform, "gpuslice_platform.p", cty.ObjectVal(map[string]cty.Value{"namespace": cty.NullVal(cty.String)}))
	if ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	if got := spec.StackOf(p).Platform; got.Namespace != "gpuslice-system" || len(got.Fractions) != 3 || !got.AdmissionPolicies {
		t.Errorf("unset platform arguments must take the schema's defaults, got %+v", got)
	}
}

// Values the spec cannot hold are errors on their attribute path.
func TestDecodeResourceRefuses(t *testing.T) {
	cases := map[string]struct {
		val       cty.Value
		summary   string
		attribute string
	}{
		"unknown":    {quota(cty.UnknownVal(cty.Map(cty.Number))), "Value known only after apply", "slices"},
		"fraction":   {quota(cty.MapVal(map[string]cty.Value{"a": cty.NumberFloatVal(0.5)})), "Whole number required", `slices["a"]`},
		"too large":  {quota(cty.MapVal(map[string]cty.Value{"a": cty.MustParseNumberVal("1e30")})), "Number out of range", `slices["a"]`},
		"null entry": {quota(cty.MapVal(map[string]cty.Value{"a": cty.NullVal(cty.Number)})), "Null element", `slices["a"]`},
		"no value":   {cty.NullVal(config.BlockType(schema.Quota.Block)), "Missing configuration", ""},
	}
	for name, c := range cases {
		_, ds := config.DecodeResource(schema.Quota, "gpuslice_quota.q", c.val)
		if len(ds) != 1 || ds[0].Summary != c.summary || ds[0].Attribute != c.attribute || ds[0].Address != "gpuslice_quota.q" {
			t.Errorf("%s: got %v, want %q on %q", name, ds, c.summary, c.attribute)
		}
	}
}
