package tfvalue

import (
	"math/big"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Values keep their nulls and unknowns both ways, in nested blocks too.
func TestValuesRoundTrip(t *testing.T) {
	port := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"container_port": tftypes.Number, "name": tftypes.String}}
	ty := tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"name":    tftypes.String,
		"slices":  tftypes.Map{ElementType: tftypes.Number},
		"command": tftypes.List{ElementType: tftypes.String},
		"ports":   tftypes.List{ElementType: port},
		"ok":      tftypes.Bool,
		"node":    tftypes.String,
	}}
	in := tftypes.NewValue(ty, map[string]tftypes.Value{
		"name":    tftypes.NewValue(tftypes.String, "ollama"),
		"slices":  tftypes.NewValue(tftypes.Map{ElementType: tftypes.Number}, map[string]tftypes.Value{"v100-8gi": tftypes.NewValue(tftypes.Number, big.NewFloat(2))}),
		"command": tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, nil),
		"ports": tftypes.NewValue(tftypes.List{ElementType: port}, []tftypes.Value{tftypes.NewValue(port, map[string]tftypes.Value{
			"container_port": tftypes.NewValue(tftypes.Number, big.NewFloat(11434)), "name": tftypes.NewValue(tftypes.String, tftypes.UnknownValue),
		})}),
		"ok":   tftypes.NewValue(tftypes.Bool, true),
		"node": tftypes.NewValue(tftypes.String, tftypes.UnknownValue),
	})
	c, err := ToCty(in)
	if err != nil {
		t.Fatal(err)
	}
	if c.GetAttr("node").IsKnown() || !c.GetAttr("command").IsNull() || c.GetAttr("name").AsString() != "ollama" {
		t.Errorf("cty value %#v lost a null, unknown or string", c)
	}
	out, err := FromCty(c, ty)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Equal(in) {
		t.Errorf("round trip changed the value:\n in  %s\n out %s", in, out)
	}
}

func TestAttributePath(t *testing.T) {
	for in, want := range map[string]path.Path{
		"fraction":                  path.Root("fraction"),
		"container.image":           path.Root("container").AtName("image"),
		`slices["v100-8gi"]`:        path.Root("slices").AtMapKey("v100-8gi"),
		"container.port[0].name":    path.Root("container").AtName("port").AtListIndex(0).AtName("name"),
		`container.env["A.B"]`:      path.Root("container").AtName("env").AtMapKey("A.B"),
		"fractions[2]":              path.Root("fractions").AtListIndex(2),
		"container.readiness_probe": path.Root("container").AtName("readiness_probe"),
	} {
		got, ok := AttributePath(in)
		if !ok || !got.Equal(want) {
			t.Errorf("AttributePath(%q) = %s, %v; want %s", in, got, ok, want)
		}
	}
}
