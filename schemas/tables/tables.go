// Package tables loads the data tables under schemas/tables: facts about
// GPU models (and, for the plan-time checks, images and LLMs) kept as
// versioned YAML rather than code, so users can extend them with a file of
// their own.
package tables

import (
	_ "embed"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed gpu-models.yaml
var gpuModelsYAML []byte

// GPUModel is one row of gpu-models.yaml.
type GPUModel struct {
	Name              string `json:"name"`
	MemoryMiB         int64  `json:"memory_mib"`
	ComputeCapability string `json:"compute_capability"`
	Architecture      string `json:"architecture"`
}

type gpuModelFile struct {
	Version int        `json:"version"`
	Models  []GPUModel `json:"models"`
}

// GPUModels is a lookup table of GPU models by NVML name.
type GPUModels map[string]GPUModel

// Names returns the model names, for error messages.
func (t GPUModels) Names() []string {
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	return names
}

// BuiltinGPUModels returns the table shipped with gpuslice.
func BuiltinGPUModels() GPUModels {
	t, err := parseGPUModels("gpu-models.yaml", gpuModelsYAML)
	if err != nil {
		panic(err) // the embedded table is tested
	}
	return t
}

// LoadGPUModels returns the built-in table extended (and overridden, row by
// row) by the given files.
func LoadGPUModels(paths ...string) (GPUModels, error) {
	t := BuiltinGPUModels()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read GPU model table: %w", err)
		}
		extra, err := parseGPUModels(p, data)
		if err != nil {
			return nil, err
		}
		for name, m := range extra {
			t[name] = m
		}
	}
	return t, nil
}

func parseGPUModels(name string, data []byte) (GPUModels, error) {
	var f gpuModelFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("%s: version %d is not supported (this gpuslice reads version 1)", name, f.Version)
	}
	t := GPUModels{}
	for i, m := range f.Models {
		switch {
		case strings.TrimSpace(m.Name) == "":
			return nil, fmt.Errorf("%s: models[%d]: name is empty", name, i)
		case m.MemoryMiB <= 0:
			return nil, fmt.Errorf("%s: model %q: memory_mib must be positive", name, m.Name)
		}
		t[m.Name] = m
	}
	return t, nil
}
