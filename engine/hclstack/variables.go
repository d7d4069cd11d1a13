package hclstack

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/gpuslice/gpuslice/engine/diag"
)

// variable is a declared input variable.
type variable struct {
	name        string
	declRange   hcl.Range
	typ         cty.Type
	defaults    *typeexpr.Defaults
	def         cty.Value // cty.NilVal when there is no default
	description string
	sensitive   bool
	nullable    bool
	validations []varValidation
}

type varValidation struct {
	condition    hcl.Expression
	errorMessage hcl.Expression
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "type"}, {Name: "default"}, {Name: "description"}, {Name: "sensitive"}, {Name: "nullable"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "validation"}},
}

var validationSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "condition", Required: true}, {Name: "error_message", Required: true},
}}

func decodeVariable(block *hcl.Block) (*variable, diag.Diagnostics) {
	v := &variable{name: block.Labels[0], declRange: block.DefRange, typ: cty.DynamicPseudoType, nullable: true}
	if !hclsyntax.ValidIdentifier(v.name) {
		return nil, diag.Diagnostics{errAt(block.LabelRanges[0], "Invalid variable name", fmt.Sprintf("%q: a name starts with a letter and holds letters, digits, '_' and '-'", v.name))}
	}
	content, hd := block.Body.Content(variableSchema)
	diags := fromHCL(hd)
	if attr, ok := content.Attributes["type"]; ok {
		typ, defaults, hd := typeexpr.TypeConstraintWithDefaults(attr.Expr)
		diags = append(diags, fromHCL(hd)...)
		v.typ, v.defaults = typ, defaults
	}
	for name, dst := range map[string]*string{"description": &v.description} {
		if attr, ok := content.Attributes[name]; ok {
			val, hd := attr.Expr.Value(nil)
			diags = append(diags, fromHCL(hd)...)
			if !hd.HasErrors() && val.Type() == cty.String && val.IsKnown() && !val.IsNull() {
				*dst = val.AsString()
			}
		}
	}
	for name, dst := range map[string]*bool{"sensitive": &v.sensitive, "nullable": &v.nullable} {
		if attr, ok := content.Attributes[name]; ok {
			val, hd := attr.Expr.Value(nil)
			diags = append(diags, fromHCL(hd)...)
			if !hd.HasErrors() {
				if b, err := convert.Convert(val, cty.Bool); err == nil && b.IsKnown() && !b.IsNull() {
					*dst = b.True()
				} else {
					diags = append(diags, errAt(attr.Expr.Range(), "Invalid "+name, "use true or false"))
				}
			}
		}
	}
	if attr, ok := content.Attributes["default"]; ok {
		val, hd := attr.Expr.Value(nil)
		diags = append(diags, fromHCL(hd)...)
		if !hd.HasErrors() {
			conv, err := v.convert(val)
			if err != nil {
				diags = append(diags, errAt(attr.Expr.Range(), "Invalid default value for variable", err.Error()))
			} else {
				v.def = conv
			}
		}
	}
	for _, b := range content.Blocks {
		vc, hd := b.Body.Content(validationSchema)
		diags = append(diags, fromHCL(hd)...)
		if hd.HasErrors() {
			continue
		}
		v.validations = append(v.validations, varValidation{condition: vc.Attributes["condition"].Expr, errorMessage: vc.Attributes["error_message"].Expr})
	}
	return v, diags
}

func (v *variable) convert(val cty.Value) (cty.Value, error) {
	if v.defaults != nil {
		val = v.defaults.Apply(val)
	}
	conv, err := convert.Convert(val, v.typ)
	if err != nil {
		return cty.NilVal, fmt.Errorf("this value does not match the variable's type %s: %s", v.typ.FriendlyName(), err)
	}
	if conv.IsNull() && !v.nullable {
		return cty.NilVal, fmt.Errorf("the variable is not nullable; give it a value")
	}
	return conv, nil
}

// rawValue is a value given for a variable outside the configuration.
type rawValue struct {
	source string         // e.g. "-var", "terraform.tfvars:3"
	text   *string        // -var and TF_VAR_ values: literal text
	expr   hcl.Expression // tfvars values
	value  *cty.Value     // module inputs, evaluated by the caller
	rng    *hcl.Range
}

// VarOptions are the variable values given on the command line.
type VarOptions struct {
	// Vars are -var name=value arguments, in order.
	Vars []string
	// VarFiles are -var-file paths, in order.
	VarFiles []string
	// Env is the environment for TF_VAR_ values (os.Environ() when nil).
	Env []string
}

// collectValues gathers variable values by Terraform's precedence: TF_VAR_
// environment variables, then terraform.tfvars, *.auto.tfvars (name order),
// then -var-file and -var in command-line order; later wins.
func collectValues(dir string, opts VarOptions, parse func(path string) (hcl.Attributes, diag.Diagnostics)) (map[string]rawValue, diag.Diagnostics) {
	vals := map[string]rawValue{}
	var diags diag.Diagnostics
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	for _, kv := range env {
		if name, value, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, "TF_VAR_") {
			vals[strings.TrimPrefix(name, "TF_VAR_")] = rawValue{source: "environment variable " + name, text: &value}
		}
	}
	fromFile := func(path string) {
		attrs, ds := parse(path)
		diags = append(diags, ds...)
		for name, attr := range attrs {
			r := attr.NameRange
			vals[name] = rawValue{source: fmt.Sprintf("%s:%d", path, r.Start.Line), expr: attr.Expr, rng: &r}
		}
	}
	auto := []string{filepath.Join(dir, "terraform.tfvars")}
	if matches, err := filepath.Glob(filepath.Join(dir, "*.auto.tfvars")); err == nil {
		sort.Strings(matches)
		auto = append(auto, matches...)
	}
	for _, p := range auto {
		if _, err := os.Stat(p); err == nil {
			fromFile(p)
		}
	}
	for _, p := range opts.VarFiles {
		if _, err := os.Stat(p); err != nil {
			diags = append(diags, diag.Diagnostic{Severity: diag.Error, Summary: "Cannot read variable file", Detail: fmt.Sprintf("-var-file=%s: %v", p, err)})
			continue
		}
		fromFile(p)
	}
	for _, arg := range opts.Vars {
		name, value, ok := strings.Cut(arg, "=")
		if !ok || name == "" {
			diags = append(diags, diag.Diagnostic{Severity: diag.Error, Summary: "Invalid -var option",
				Detail: fmt.Sprintf("%q: write -var 'name=value'", arg)})
			continue
		}
		vals[name] = rawValue{source: "-var " + name, text: &value}
	}
	return vals, diags
}

// resolve gives the variable its value: a given value, else its default.
func (v *variable) resolve(raw *rawValue) (cty.Value, diag.Diagnostics) {
	if raw == nil {
		if v.def == cty.NilVal {
			return cty.NilVal, diag.Diagnostics{errAt(v.declRange, "No value for required variable",
				fmt.Sprintf("variable %q has no default; set it with -var '%s=…', in terraform.tfvars, or with the environment variable TF_VAR_%s", v.name, v.name, v.name))}
		}
		return v.def, nil
	}
	var val cty.Value
	switch {
	case raw.value != nil:
		val = *raw.value
	case raw.text != nil && (v.typ == cty.String || v.typ == cty.DynamicPseudoType):
		val = cty.StringVal(*raw.text)
	case raw.text != nil:
		expr, hd := hclsyntax.ParseExpression([]byte(*raw.text), raw.source, hcl.InitialPos)
		if hd.HasErrors() {
			return cty.NilVal, diag.Diagnostics{{Severity: diag.Error, Summary: "Invalid value for variable " + v.name,
				Detail: fmt.Sprintf("%s: %q is not a valid %s value: %s", raw.source, *raw.text, v.typ.FriendlyName(), hd[0].Detail)}}
		}
		var vd hcl.Diagnostics
		val, vd = expr.Value(nil)
		if vd.HasErrors() {
			return cty.NilVal, diag.Diagnostics{{Severity: diag.Error, Summary: "Invalid value for variable " + v.name, Detail: raw.source + ": " + vd[0].Detail}}
		}
	default:
		var hd hcl.Diagnostics
		val, hd = raw.expr.Value(nil)
		if hd.HasErrors() {
			return cty.NilVal, fromHCL(hd)
		}
	}
	conv, err := v.convert(val)
	if err != nil {
		d := diag.Diagnostic{Severity: diag.Error, Summary: "Invalid value for variable " + v.name, Detail: raw.source + ": " + err.Error()}
		if raw.rng != nil {
			d.Range = rangeOf(raw.rng)
		}
		return cty.NilVal, diag.Diagnostics{d}
	}
	return conv, nil
}

// validate runs the variable's validation blocks against its value.
func (v *variable) validate(val cty.Value) diag.Diagnostics {
	var diags diag.Diagnostics
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{v.name: val})}, Functions: functions()}
	for _, vl := range v.validations {
		ok, hd := vl.condition.Value(ctx)
		if hd.HasErrors() {
			diags = append(diags, fromHCL(hd)...)
			continue
		}
		if ok.IsKnown() && !ok.IsNull() && ok.Type() == cty.Bool && ok.False() {
			msg, _ := vl.errorMessage.Value(ctx)
			text := "the value fails this validation"
			if msg.Type() == cty.String && msg.IsKnown() && !msg.IsNull() {
				text = msg.AsString()
			}
			diags = append(diags, errAt(vl.condition.Range(), "Invalid value for variable "+v.name, text))
		}
	}
	return diags
}
