package fastpath_test

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/provider"
	"github.com/gpuslice/gpuslice/provider/internal/fastpath"
)

// fullObject is a value of ty with every single block there and every
// list block holding one element (depth levels down; deeper ones empty),
// list and map attributes empty, the rest null.
func fullObject(ty cty.Type, depth int) cty.Value {
	attrs := map[string]cty.Value{}
	for name, at := range ty.AttributeTypes() {
		switch {
		case at.IsObjectType():
			attrs[name] = fullObject(at, depth)
		case at.IsListType() && at.ElementType().IsObjectType() && depth > 0:
			attrs[name] = cty.ListVal([]cty.Value{fullObject(at.ElementType(), depth-1)})
		case at.IsListType():
			attrs[name] = cty.ListValEmpty(at.ElementType())
		case at.IsMapType():
			attrs[name] = cty.MapValEmpty(at.ElementType())
		default:
			attrs[name] = cty.NullVal(at)
		}
	}
	return cty.ObjectVal(attrs)
}

// withoutSingleBlocks is v with its top-level single blocks null.
func withoutSingleBlocks(v cty.Value) cty.Value {
	attrs := v.AsValueMap()
	for name, a := range attrs {
		if a.Type().IsObjectType() {
			attrs[name] = cty.NullVal(a.Type())
		}
	}
	return cty.ObjectVal(attrs)
}

// The fast path's nullify and reify are the framework's
// NullifyCollectionBlocks and ReifyNullCollectionBlocks on every gpuslice
// schema: a read through the framework hands the resource the value
// nullified (what the script sees), and writes what the resource returns
// reified.
func TestNullifyAndReifyAsTheFrameworks(t *testing.T) {
	ctx := context.Background()
	fast, sc, _ := scripted(t, fastpath.On, nil)
	framework, err := providerserver.NewProtocol6WithError(&scriptedProvider{real: provider.New("test")(), script: sc})()
	if err != nil {
		t.Fatal(err)
	}
	for _, typeName := range gpusliceTypes(t) {
		ty, idType, _ := fast.Types(typeName)
		ids := blankState(ty, idType)
		withIDs := func(v cty.Value) cty.Value {
			attrs := v.AsValueMap()
			for _, name := range append(sortedAttributes(idType), "id") {
				attrs[name] = ids.GetAttr(name)
			}
			return cty.ObjectVal(attrs)
		}
		identity := map[string]string{}
		for _, name := range sortedAttributes(idType) {
			identity[name] = ids.GetAttr(name).AsString()
		}
		values := map[string]cty.Value{
			"lists empty":         withIDs(fullObject(ty, 0)),
			"one element each":    withIDs(fullObject(ty, 1)),
			"two levels":          withIDs(fullObject(ty, 2)),
			"single blocks null":  withIDs(withoutSingleBlocks(fullObject(ty, 1))),
			"single blocks empty": withIDs(withoutSingleBlocks(fullObject(ty, 0))),
		}
		for name, v := range values {
			t.Run(typeName+"/"+name, func(t *testing.T) {
				var saw cty.Value
				sc.read = func(state cty.Value) fastpath.ReadResult {
					saw = state
					return fastpath.ReadResult{State: state, Identity: identity}
				}
				resp, err := framework.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: typeName, CurrentState: dynamic(t, v)})
				if err != nil || len(resp.Diagnostics) > 0 {
					t.Fatalf("read: %v %s", err, describe(resp.Diagnostics))
				}
				if want := fast.Nullify(typeName, v); !saw.RawEquals(want) {
					t.Errorf("the framework nullified to %#v, the fast path to %#v", saw, want)
				}
				got := undynamic(t, resp.NewState, ty)
				if want := fast.Reify(typeName, saw); !got.RawEquals(want) {
					t.Errorf("the framework reified to %#v, the fast path to %#v", got, want)
				}
				if !got.RawEquals(v) {
					t.Errorf("a read of what it was given came back as %#v, not %#v", got, v)
				}
			})
		}
	}
}
