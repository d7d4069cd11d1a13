package config

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// fill sets a spec exactly as encoding/json sets it from the value written
// as JSON (which Decode did before): every resource type, with random
// values of its arguments' types, nulls and empty collections included.
func TestFillIsTheJSONRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, res := range schema.Resources() {
		ty := BlockType(res.Block)
		for i := range 300 {
			v := randomValue(r, ty, 0)
			viaJSON, direct := newSpec(res), newSpec(res)
			data, err := ctyjson.Marshal(v, ty)
			if err != nil {
				t.Fatal(err)
			}
			jerr := json.Unmarshal(data, viaJSON)
			ferr := fill(v, reflect.ValueOf(direct), "")
			if (jerr == nil) != (ferr == nil) {
				t.Fatalf("%s #%d: json says %v, fill says %v\n%s", res.Type, i, jerr, ferr, data)
			}
			if jerr == nil && !reflect.DeepEqual(viaJSON, direct) {
				t.Fatalf("%s #%d: fill set\n%+v\nJSON sets\n%+v\nfrom %s", res.Type, i, direct, viaJSON, data)
			}
		}
	}
}

// A number the spec's field cannot hold is an error on its attribute,
// with the range to write.
func TestDecodeRefusesANumberTheSpecCannotHold(t *testing.T) {
	vals := map[string]cty.Value{}
	for name, ty := range BlockType(schema.Workload.Block).AttributeTypes() {
		vals[name] = cty.NullVal(ty)
	}
	vals["replicas"] = cty.NumberIntVal(1 << 40)
	_, ds := Decode(schema.Workload, "gpuslice_workload.w", cty.ObjectVal(vals))
	if len(ds) != 1 || ds[0].Attribute != "replicas" || ds[0].Summary != "Number out of range" ||
		ds[0].Detail != "1099511627776 does not fit this attribute; write a number between -2147483648 and 2147483647" {
		t.Errorf("got %v", ds)
	}
}

func newSpec(res schema.Resource) spec.Resource {
	switch res.Type {
	case schema.Platform.Type:
		return &spec.Platform{}
	case schema.Package.Type:
		return &spec.Package{}
	case schema.Quota.Type:
		return &spec.Quota{}
	}
	return &spec.Workload{}
}

func randomValue(r *rand.Rand, ty cty.Type, depth int) cty.Value {
	if r.IntN(6) == 0 {
		return cty.NullVal(ty)
	}
	n := r.IntN(3)
	switch {
	case ty == cty.String:
		return cty.StringVal(fmt.Sprintf("s%d", r.IntN(100)))
	case ty == cty.Bool:
		return cty.BoolVal(r.IntN(2) == 0)
	case ty == cty.Number:
		return cty.NumberIntVal([]int64{0, 1, -3, 25, 11434, 1 << 31, -1 << 31, 1 << 40}[r.IntN(8)])
	case ty.IsListType() || ty.IsSetType():
		if n == 0 && ty.IsListType() {
			return cty.ListValEmpty(ty.ElementType())
		} else if n == 0 {
			return cty.SetValEmpty(ty.ElementType())
		}
		elems := make([]cty.Value, n)
		for i := range elems {
			elems[i] = nonNull(r, ty.ElementType(), depth+1)
		}
		if ty.IsListType() {
			return cty.ListVal(elems)
		}
		return cty.SetVal(elems)
	case ty.IsMapType():
		if n == 0 {
			return cty.MapValEmpty(ty.ElementType())
		}
		elems := map[string]cty.Value{}
		for i := range n {
			elems[fmt.Sprintf("k%d", i)] = nonNull(r, ty.ElementType(), depth+1)
		}
		return cty.MapVal(elems)
	case ty.IsObjectType():
		attrs := map[string]cty.Value{}
		for name, at := range ty.AttributeTypes() {
			attrs[name] = randomValue(r, at, depth+1)
		}
		return cty.ObjectVal(attrs)
	}
	panic("no random value of " + ty.FriendlyName())
}

func nonNull(r *rand.Rand, ty cty.Type, depth int) cty.Value {
	for {
		if v := randomValue(r, ty, depth); !v.IsNull() {
			return v
		}
	}
}
