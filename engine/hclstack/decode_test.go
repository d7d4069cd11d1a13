package hclstack_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine/config"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// The provider's values and a .tf file decode to the same spec: same
// defaults, same checks.
func TestDecodeResourceMatchesLoad(t *testing.T) {
	dir := t.TempDir()
	hcl := `
resource "gpuslice_package" "small" {
  name      = "v100-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_workload" "ollama" {
  namespace = "team-a"
  name      = "ollama"
  package   = gpuslice_package.small.name
  container {
    image = "ollama/ollama:0.24.0"
    env   = { OLLAMA_CONTEXT_LENGTH = "16384" }
    port {
      container_port = 11434
    }
  }
  expose {
    port = 11434
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	c, diags := hclstack.Load(dir, hclstack.Options{Stack: "s"})
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	want := c.Stack.Workloads[0]

	// What the framework hands over: every argument present, unset ones
	// null, plus computed attributes (unknown) and provider extras.
	args := config.BlockType(schema.Workload.Block)
	vals := map[string]cty.Value{}
	for name, ty := range args.AttributeTypes() {
		vals[name] = cty.NullVal(ty)
	}
	vals["namespace"], vals["name"], vals["package"] = cty.StringVal("team-a"), cty.StringVal("ollama"), cty.StringVal("v100-8gi")
	containerType := args.AttributeType("container")
	container := map[string]cty.Value{}
	for name, ty := range containerType.AttributeTypes() {
		container[name] = cty.NullVal(ty)
	}
	container["image"] = cty.StringVal("ollama/ollama:0.24.0")
	container["env"] = cty.MapVal(map[string]cty.Value{"OLLAMA_CONTEXT_LENGTH": cty.StringVal("16384")})
	container["port"] = cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
		"container_port": cty.NumberIntVal(11434), "name": cty.NullVal(cty.String), "protocol": cty.NullVal(cty.String),
	})})
	vals["container"] = cty.ObjectVal(container)
	vals["expose"] = cty.ObjectVal(map[string]cty.Value{"port": cty.NumberIntVal(11434), "target_port": cty.NullVal(cty.Number), "type": cty.NullVal(cty.String)})
	vals["node"] = cty.UnknownVal(cty.String)
	vals["timeouts"] = cty.NullVal(cty.Object(map[string]cty.Type{"create": cty.String}))

	got, ds := config.DecodeResource(schema.Workload, want.Address, cty.ObjectVal(vals))
	if ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	if !reflect.DeepEqual(got, spec.Resource(want)) {
		t.Errorf("DecodeResource:\n%+v\nLoad:\n%+v", got, want)
	}

	vals["replicas"] = cty.NumberFloatVal(1.5)
	if _, ds := config.DecodeResource(schema.Workload, want.Address, cty.ObjectVal(vals)); len(ds) != 1 || ds[0].Summary != "Whole number required" || ds[0].Attribute != "replicas" {
		t.Errorf("fractional replicas: got %v, want the HCL front end's Whole number required on replicas", ds)
	}
}
