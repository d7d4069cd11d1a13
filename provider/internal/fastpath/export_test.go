package fastpath

import (
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
)

// Types are the cty types of the values and identity of a resource type
// the fast path serves; false for one it leaves to the framework.
func (s *Server) Types(typeName string) (value, identity cty.Type, ok bool) {
	t := s.types[typeName]
	if t == nil {
		return cty.NilType, cty.NilType, false
	}
	return t.value, t.identity, true
}

// Nullify is the fast path's NullifyCollectionBlocks of a value of
// typeName.
func (s *Server) Nullify(typeName string, v cty.Value) cty.Value {
	return s.types[typeName].block.nullify(v)
}

// Reify is the fast path's ReifyNullCollectionBlocks of a value of
// typeName.
func (s *Server) Reify(typeName string, v cty.Value) cty.Value {
	return s.types[typeName].block.reify(v)
}

// Diffs are check mode's comparisons of each response, for typeName.
func (s *Server) Diffs(typeName string) (
	validate func(fast, slow *tfprotov6.ValidateResourceConfigResponse) []string,
	upgrade func(fast, slow *tfprotov6.UpgradeResourceStateResponse) []string,
	read func(fast, slow *tfprotov6.ReadResourceResponse) []string,
	plan func(fast, slow *tfprotov6.PlanResourceChangeResponse) []string,
) {
	t := s.types[typeName]
	return validateDiff,
		func(fast, slow *tfprotov6.UpgradeResourceStateResponse) []string { return upgradeDiff(t, fast, slow) },
		func(fast, slow *tfprotov6.ReadResourceResponse) []string { return readDiff(t, fast, slow) },
		func(fast, slow *tfprotov6.PlanResourceChangeResponse) []string { return planDiff(t, fast, slow) }
}

// WithRecord is the context of one request the fast path serves.
var WithRecord = withRecord

// RecordDiffers is what Once found different in the request of ctx.
var RecordDiffers = recordDiffers
