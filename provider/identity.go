package provider

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Resource identity (Terraform 1.12+): the attributes the import ID is made
// of — a package's name, a quota's namespace, a workload's namespace and
// name — so `import { identity = { … } }` works besides `id`.

var _ resource.ResourceWithIdentity = (*gpusliceResource)(nil)

func (r *gpusliceResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	attrs := map[string]identityschema.Attribute{}
	for _, name := range r.def.Identity {
		a, _ := r.def.Attribute(name)
		attrs[name] = identityschema.StringAttribute{RequiredForImport: true, Description: a.Description}
	}
	resp.IdentitySchema = identityschema.Schema{Attributes: attrs}
}

// setIdentity records the identity of the resource whose import ID is id.
func (r *gpusliceResource) setIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, id string, diags *diag.Diagnostics) {
	setIdentityAttributes(ctx, identity, r.identityAttributes(id), diags)
}

func setIdentityAttributes(ctx context.Context, identity *tfsdk.ResourceIdentity, attrs map[string]string, diags *diag.Diagnostics) {
	if identity == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		diags.Append(identity.SetAttribute(ctx, path.Root(name), attrs[name])...)
	}
}

// identityAttributes are the identity attributes the import ID id names.
func (r *gpusliceResource) identityAttributes(id string) map[string]string {
	out := map[string]string{}
	parts := strings.SplitN(id, "/", len(r.def.Identity))
	for i, name := range r.def.Identity {
		if i < len(parts) {
			out[name] = parts[i]
		}
	}
	return out
}

// idFromIdentity is the import ID an identity names.
func (r *gpusliceResource) idFromIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics) string {
	var parts []string
	for _, name := range r.def.Identity {
		var v types.String
		diags.Append(identity.GetAttribute(ctx, path.Root(name), &v)...)
		parts = append(parts, v.ValueString())
	}
	return strings.Join(parts, "/")
}
