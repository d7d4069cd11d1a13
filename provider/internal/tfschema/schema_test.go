package tfschema

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"

	engineschema "github.com/gpuslice/gpuslice/engine/schema"
)

// TestAlsoRequiresAsTheFrameworks: the block validator gives exactly the
// diagnostics objectvalidator.AlsoRequires gives, for a block left out,
// complete, missing required attributes, or with unknown ones.
func TestAlsoRequiresAsTheFrameworks(t *testing.T) {
	ctx := context.Background()
	block := engineschema.Block{Name: "probe", Nesting: engineschema.NestingSingle, Attributes: []engineschema.Attribute{
		{Name: "path", Type: cty.String, Required: true},
		{Name: "port", Type: cty.Number, Required: true},
		{Name: "period", Type: cty.Number},
	}}
	s := schema.Schema{Blocks: map[string]schema.Block{"probe": singleBlock(block)}}
	ty := s.Type().TerraformType(ctx)
	probeTy := ty.(tftypes.Object).AttributeTypes["probe"]
	probe := func(path, port, period tftypes.Value) tftypes.Value {
		return tftypes.NewValue(ty, map[string]tftypes.Value{"probe": tftypes.NewValue(probeTy, map[string]tftypes.Value{
			"path": path, "port": port, "period": period})})
	}
	str, num := tftypes.String, tftypes.Number
	cases := map[string]tftypes.Value{
		"absent":   tftypes.NewValue(ty, map[string]tftypes.Value{"probe": tftypes.NewValue(probeTy, nil)}),
		"complete": probe(tftypes.NewValue(str, "/"), tftypes.NewValue(num, 80), tftypes.NewValue(num, nil)),
		"no path":  probe(tftypes.NewValue(str, nil), tftypes.NewValue(num, 80), tftypes.NewValue(num, 3)),
		"neither":  probe(tftypes.NewValue(str, nil), tftypes.NewValue(num, nil), tftypes.NewValue(num, 3)),
		"unknown":  probe(tftypes.NewValue(str, tftypes.UnknownValue), tftypes.NewValue(num, nil), tftypes.NewValue(num, nil)),
		"unknown2": probe(tftypes.NewValue(str, nil), tftypes.NewValue(num, tftypes.UnknownValue), tftypes.NewValue(num, nil)),
	}
	ours := AlsoRequires{"path", "port"}
	theirs := objectvalidator.AlsoRequires(path.MatchRelative().AtName("path"), path.MatchRelative().AtName("port"))
	if ours.MarkdownDescription(ctx) != theirs.MarkdownDescription(ctx) {
		t.Errorf("description %q, the framework's %q", ours.MarkdownDescription(ctx), theirs.MarkdownDescription(ctx))
	}
	for name, raw := range cases {
		config := tfsdk.Config{Schema: s, Raw: raw}
		var value types.Object
		if ds := config.GetAttribute(ctx, path.Root("probe"), &value); ds.HasError() {
			t.Fatal(ds)
		}
		req := validator.ObjectRequest{Path: path.Root("probe"), PathExpression: path.MatchRoot("probe"), Config: config, ConfigValue: value}
		var got, want validator.ObjectResponse
		ours.ValidateObject(ctx, req, &got)
		theirs.ValidateObject(ctx, req, &want)
		if !got.Diagnostics.Equal(want.Diagnostics) {
			t.Errorf("%s: got %v, the framework's validator %v", name, got.Diagnostics, want.Diagnostics)
		}
		if name == "neither" && len(got.Diagnostics) != 2 {
			t.Errorf("%s: %d diagnostics, want 2", name, len(got.Diagnostics))
		}
	}
}
