package config

import (
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"sync"

	"github.com/zclconf/go-cty/cty"
)

// fillError is a value the spec cannot hold, at its attribute path.
type fillError struct {
	path, summary, detail string
}

func (e *fillError) Error() string { return pathOr(e.path) + ": " + e.detail }

// fill sets target from v the way encoding/json would set it from v
// written as JSON: object attributes to the fields their json tag names,
// unknown attributes ignored, null leaving the zero value. It reads the
// value where it lies: a large configuration decodes each of thousands of
// resources without writing and parsing a JSON copy of it.
func fill(v cty.Value, target reflect.Value, path string) error {
	if v.IsNull() {
		return nil
	}
	if !v.IsKnown() {
		return &fillError{path, "Value known only after apply", "this attribute depends on a value gpuslice learns only by applying; use a value known before apply"}
	}
	switch target.Kind() {
	case reflect.Pointer:
		if target.IsNil() {
			target.Set(reflect.New(target.Type().Elem()))
		}
		return fill(v, target.Elem(), path)
	case reflect.Struct:
		return fillStruct(v, target, path)
	case reflect.Slice:
		return fillSlice(v, target, path)
	case reflect.Map:
		return fillMap(v, target, path)
	}
	return fillScalar(v, target, path)
}

func fillStruct(v cty.Value, target reflect.Value, path string) error {
	ty := v.Type()
	if !ty.IsObjectType() {
		return mismatch(v, target, path)
	}
	fields := fieldsOf(target.Type())
	for name := range ty.AttributeTypes() {
		idx, ok := fields[name]
		if !ok {
			continue
		}
		if err := fill(v.GetAttr(name), target.FieldByIndex(idx), join(path, name)); err != nil {
			return err
		}
	}
	return nil
}

func fillSlice(v cty.Value, target reflect.Value, path string) error {
	ty := v.Type()
	if !ty.IsListType() && !ty.IsSetType() && !ty.IsTupleType() {
		return mismatch(v, target, path)
	}
	out := reflect.MakeSlice(target.Type(), v.LengthInt(), v.LengthInt())
	i := 0
	for it := v.ElementIterator(); it.Next(); i++ {
		_, ev := it.Element()
		if err := fill(ev, out.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	target.Set(out)
	return nil
}

func fillMap(v cty.Value, target reflect.Value, path string) error {
	ty := v.Type()
	if (!ty.IsMapType() && !ty.IsObjectType()) || target.Type().Key().Kind() != reflect.String {
		return mismatch(v, target, path)
	}
	out := reflect.MakeMapWithSize(target.Type(), v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		elem := reflect.New(target.Type().Elem()).Elem()
		if err := fill(ev, elem, fmt.Sprintf("%s[%q]", path, k.AsString())); err != nil {
			return err
		}
		out.SetMapIndex(reflect.ValueOf(k.AsString()).Convert(target.Type().Key()), elem)
	}
	target.Set(out)
	return nil
}

// fillScalar sets the strings, bools and whole numbers the specs hold.
func fillScalar(v cty.Value, target reflect.Value, path string) error {
	switch k := target.Kind(); {
	case k == reflect.String && v.Type() == cty.String:
		target.SetString(v.AsString())
	case k == reflect.Bool && v.Type() == cty.Bool:
		target.SetBool(v.True())
	case target.CanInt() && v.Type() == cty.Number:
		n, acc := v.AsBigFloat().Int64()
		if acc != big.Exact || target.OverflowInt(n) {
			return outOfRange(v, target, path)
		}
		target.SetInt(n)
	default:
		return mismatch(v, target, path)
	}
	return nil
}

func mismatch(v cty.Value, target reflect.Value, path string) error {
	return &fillError{path, "Unsupported value", fmt.Sprintf("%s cannot hold %s; this is a bug in gpuslice's schema", target.Type(), v.Type().FriendlyName())}
}

func outOfRange(v cty.Value, target reflect.Value, path string) error {
	bits := target.Type().Bits()
	return &fillError{path, "Number out of range", fmt.Sprintf("%s does not fit this attribute; write a number between %d and %d",
		v.AsBigFloat().Text('f', -1), int64(-1)<<(bits-1), uint64(1)<<(bits-1)-1)}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func pathOr(path string) string {
	if path == "" {
		return "the resource"
	}
	return path
}

// fieldIndexes are a struct type's fields by their json names, those of
// embedded structs included (as encoding/json promotes them).
var fieldIndexes sync.Map // reflect.Type → map[string][]int

func fieldsOf(t reflect.Type) map[string][]int {
	if m, ok := fieldIndexes.Load(t); ok {
		return m.(map[string][]int)
	}
	m := map[string][]int{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Tag.Get("json") == "" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		if _, dup := m[name]; !dup || len(f.Index) < len(m[name]) {
			m[name] = f.Index
		}
	}
	fieldIndexes.Store(t, m)
	return m
}
