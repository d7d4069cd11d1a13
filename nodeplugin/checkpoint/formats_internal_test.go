package checkpoint

import (
	"reflect"
	"testing"
)

// TestFormatsAreFrozen: no on-disk format is made of the live types, so
// changing Claim or Device (a field, a JSON name) cannot change what a
// format holds and what an older plugin reads of it: each format has
// types of its own, converted to and from the live ones.
func TestFormatsAreFrozen(t *testing.T) {
	live := map[reflect.Type]bool{}
	for _, v := range []any{Checkpoint{}, Claim{}, Device{}, MIGInstance{}} {
		live[reflect.TypeOf(v)] = true
	}
	for name, format := range map[string]any{
		"v0": fileV0{}, "v0 data": checkpointV0{}, "v1": fileV1{}, "v1 data": checkpointV1{}, "v2": fileV2{}, "v2 data": checkpointV2{},
		"v3 and v4": fileV3{}, "v3 data": checkpointV3{}, "v4 data": checkpointV4{},
	} {
		seen := map[reflect.Type]bool{}
		var walk func(reflect.Type, string)
		walk = func(ty reflect.Type, path string) {
			if seen[ty] {
				return
			}
			seen[ty] = true
			if live[ty] {
				t.Errorf("format %s holds the live type %s at %s", name, ty, path)
			}
			switch ty.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Array:
				walk(ty.Elem(), path+"[]")
			case reflect.Map:
				walk(ty.Key(), path+"{key}")
				walk(ty.Elem(), path+"{}")
			case reflect.Struct:
				for i := range ty.NumField() {
					walk(ty.Field(i).Type, path+"."+ty.Field(i).Name)
				}
			}
		}
		walk(reflect.TypeOf(format), name)
	}
}
