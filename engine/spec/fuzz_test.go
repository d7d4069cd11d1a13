package spec_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// FuzzValidate decodes arbitrary JSON into a stack (the typed form the HCL
// front end and the provider both produce) and validates it. Validation
// must never panic, must name the resource and attribute of every problem,
// and a stack it accepts must render: rendering trusts validation (quantities
// are parsed with MustParse), so a gap in validation shows up here. The seed
// corpus is testdata/fuzz/FuzzValidate plus the engine's test
// configurations; go test -fuzz FuzzValidate explores.
func FuzzValidate(f *testing.F) {
	dirs, _ := filepath.Glob("../render/testdata/configs/*")
	for _, dir := range dirs {
		c, diags := hclstack.Load(dir, hclstack.Options{Stack: "seed", VarOptions: hclstack.VarOptions{Env: []string{}}})
		if diags.HasErrors() {
			f.Fatal(diags.Err())
		}
		data, err := json.Marshal(c.Stack)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	models := tables.BuiltinGPUModels()
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &spec.Stack{}
		if json.Unmarshal(data, s) != nil {
			return
		}
		s.Name = "fuzz"
		// The front ends never produce nil resources; addresses are not
		// part of the JSON form.
		s.Packages = slices.DeleteFunc(s.Packages, func(p *spec.Package) bool { return p == nil })
		s.Quotas = slices.DeleteFunc(s.Quotas, func(q *spec.Quota) bool { return q == nil })
		s.Workloads = slices.DeleteFunc(s.Workloads, func(w *spec.Workload) bool { return w == nil })
		if s.Platform != nil {
			s.Platform.Address = "gpuslice_platform.this"
		}
		for i, p := range s.Packages {
			p.Address = fmt.Sprintf("gpuslice_package.p%d", i)
		}
		for i, q := range s.Quotas {
			q.Address = fmt.Sprintf("gpuslice_quota.q%d", i)
		}
		for i, w := range s.Workloads {
			w.Address = fmt.Sprintf("gpuslice_workload.w%d", i)
		}
		s.Resolve(models)
		diags := spec.Validate(s, models)
		for _, d := range diags {
			if d.Address == "" || d.Attribute == "" {
				t.Errorf("diagnostic without resource and attribute: %v", d)
			}
		}
		if diags.HasErrors() {
			return
		}
		if _, err := render.Stack(s); err != nil {
			t.Errorf("valid stack does not render: %v", err)
		}
	})
}
