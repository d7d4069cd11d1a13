package checks

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// migStack is the field configuration with its workload on a 1g.5gb MIG
// package of an A100-SXM4-40GB, resolved from the tables.
func migStack(t *testing.T) (*spec.Stack, *spec.Workload) {
	t.Helper()
	s := goodStack()
	s.Packages = []*spec.Package{{Meta: spec.Meta{Address: "gpuslice_package.mig"}, Name: "a100-1g", GPUModel: "NVIDIA A100-SXM4-40GB", MIGProfile: "1g.5gb"}}
	s.Quotas[0].Slices = map[string]int64{"a100-1g": 2}
	w := s.Workloads[0]
	w.Package = "a100-1g"
	s.Resolve(tables.BuiltinGPUModels())
	if s.Packages[0].MemoryBytes != 4864<<20 {
		t.Fatalf("1g.5gb resolved to %d bytes", s.Packages[0].MemoryBytes)
	}
	return s, w
}

// An LLM that does not fit a 1g.5gb instance fails at plan as on a V100
// slice, with the instance's memory; one that fits passes.
func TestMIGModelFit(t *testing.T) {
	s, w := migStack(t)
	w.Model = &spec.Model{Name: "llama3.1:8b", ContextLength: 16384}
	w.PreloadModels = []string{"llama3.1:8b"}
	got := Run(s, tables.Builtin(), nil, "")
	if diff := cmp.Diff([]string{"Error container.env[\"OLLAMA_CONTEXT_LENGTH\"]: Model does not fit the slice"}, short(got)); diff != "" {
		t.Fatalf("diagnostics (-want +got):\n%s\nall: %v", diff, got)
	}
	if !strings.Contains(got[0].Detail, "a a100-1g slice has 4.8 GiB") {
		t.Errorf("detail does not name the instance's memory: %s", got[0].Detail)
	}
	s, w = migStack(t)
	w.Model, w.PreloadModels = &spec.Model{Name: "llama3.2:1b", ContextLength: 4096}, []string{"llama3.2:1b"}
	w.Container.Env["OLLAMA_CONTEXT_LENGTH"] = "4096"
	if got := Run(s, tables.Builtin(), nil, ""); len(got) != 0 {
		t.Errorf("a 1b model with 4096 tokens on 4.75 GiB: %v", got)
	}
}

// A MIG package whose profile no node publishes: each workload on it
// fails at plan and the package is warned about, saying what the nodes
// publish and how to create the instances; nothing is said when a node
// publishes the profile, or when the cluster publishes no slices at all.
func TestMIGProfileNotPublished(t *testing.T) {
	const a100 = "NVIDIA A100-SXM4-40GB"
	for _, c := range []struct {
		name      string
		published map[string]map[string]int
		mig       map[string]map[string]int
		detail    string
	}{
		{"no node plugin yet", nil, nil, ""},
		{"the profile", map[string]map[string]int{a100: {contract.SharingMIG: 7}}, map[string]map[string]int{a100: {"1g.5gb": 7}}, ""},
		{"another profile", map[string]map[string]int{a100: {contract.SharingMIG: 2}}, map[string]map[string]int{a100: {"3g.20gb": 2}},
			"the nodes with NVIDIA A100-SXM4-40GB GPUs in MIG mode publish MIG instances of 2 × 3g.20gb only, none of 1g.5gb; put the NVIDIA A100-SXM4-40GB GPUs of a node in MIG mode with 1g.5gb instances (nvidia-smi -mig 1, then nvidia-smi mig -cgi 1g.5gb -C)"},
		{"A100s not in MIG mode", map[string]map[string]int{a100: {contract.SharingPartition: 7}}, nil,
			"the nodes with NVIDIA A100-SXM4-40GB GPUs publish partition devices only: none of their GPUs is in MIG mode"},
		{"V100s only", map[string]map[string]int{"Tesla V100-PCIE-32GB": {contract.SharingPartition: 7}}, nil,
			"no node publishes NVIDIA A100-SXM4-40GB GPUs (the cluster's nodes publish Tesla V100-PCIE-32GB)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := migStack(t)
			f := emptyFacts()
			f.Published, f.PublishedMIG = c.published, c.mig
			var got []string
			for _, d := range Run(s, tables.Builtin(), f, "") {
				if d.Summary == "MIG slices not offered" {
					got = append(got, d.Severity.String()+" "+d.Address+"."+d.Attribute+": "+d.Detail)
				}
			}
			if c.detail == "" {
				if len(got) != 0 {
					t.Fatalf("want nothing, got %q", got)
				}
				return
			}
			if len(got) != 2 || !strings.HasPrefix(got[0], "Warning gpuslice_package.mig.mig_profile: "+c.detail) ||
				!strings.HasPrefix(got[1], "Error gpuslice_workload.ollama.package: gpuslice_workload.ollama's pods would wait in Pending for good: "+c.detail) {
				t.Fatalf("got %q\nwant a package warning and a workload error saying %q", got, c.detail)
			}
		})
	}
}

// Several MIG instances per pod fail at plan: a CUDA process uses one.
func TestMIGSeveralPerPod(t *testing.T) {
	s, w := migStack(t)
	w.GPUsPerPod = 2
	got := Run(s, tables.Builtin(), nil, "")
	if len(got) == 0 || got[0].Summary != "Several MIG instances per pod" || !strings.Contains(got[0].Detail, "a CUDA process uses one MIG instance") {
		t.Fatalf("got %v", got)
	}
}
