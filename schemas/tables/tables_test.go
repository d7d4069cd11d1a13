package tables

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-version"
)

func TestBuiltinGPUModels(t *testing.T) {
	m, ok := BuiltinGPUModels()["Tesla V100-PCIE-32GB"]
	if !ok || m.MemoryMiB != 32768 || m.ComputeCapability != "7.0" || m.Architecture != "Volta" {
		t.Fatalf("V100-PCIE-32GB row = %+v, %v", m, ok)
	}
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadExtendsAndRejects(t *testing.T) {
	good := writeFile(t, "mine.yaml", `version: 1
gpu_models:
  - name: My GPU
    memory_mib: 1024
    compute_capability: "8.6"
    architecture: Ampere
llms:
  - {name: tiny:1b, weights_mib: 700, layers: 16, kv_heads: 4, head_dim: 64}
images:
  - repository: ollama/ollama
    rules:
      - {versions: ">= 0", min_compute_capability: "9.0"}
`)
	s, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if s.GPUModels["My GPU"].MemoryMiB != 1024 || s.GPUModels["Tesla V100-PCIE-32GB"].MemoryMiB != 32768 {
		t.Fatalf("merged GPU table wrong: %+v", s.GPUModels["My GPU"])
	}
	if s.LLMs["tiny:1b"].Layers != 16 || s.LLMs["llama3.2:3b"].Layers != 28 {
		t.Fatalf("merged LLM table wrong: %+v", s.LLMs)
	}
	if _, rule, _ := s.Images["ollama/ollama"].Match("0.24.0"); rule.MinComputeCapability != "9.0" {
		t.Fatalf("a user's row must replace the built-in one, got %+v", rule)
	}

	for _, c := range []struct{ body, want string }{
		{"version: 1\ngpu_models:\n  - name: X\n    memory_mb: 3\n", "memory_mb"},
		{"version: 2\ngpu_models: []\n", "version 2 is not supported"},
		{"version: 1\nmodels: []\n", "the sections are gpu_models, mig_profiles, images, llms, runtimes"},
		{"version: 1\nimages:\n  - repository: x/y\n    rules:\n      - {versions: \"<<1\", min_compute_capability: \"7.0\"}\n", "rules[0].versions"},
		{"version: 1\nimages:\n  - repository: x/y\n    version_from_tag: \"abc\"\n", "first group is the version"},
		{"version: 1\nllms:\n  - {name: m, weights_mib: 0, layers: 1, kv_heads: 1, head_dim: 1}\n", "llms[0] (m)"},
		{"version: 1\nruntimes:\n  - {name: r, images: [a/b], memory_floor: lots}\n", "memory_floor"},
	} {
		bad := writeFile(t, "bad.yaml", c.body)
		if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want the file and %q named", c.body, err, c.want)
		}
	}
}

func TestImageRules(t *testing.T) {
	s := Builtin()
	volta := version.Must(version.NewVersion("7.0"))
	for _, c := range []struct {
		repo, tag string
		known     bool
		runs      bool
	}{
		{"ollama/ollama", "0.24.0", true, true},
		{"ollama/ollama", "0.23.1", true, true},
		{"ollama/ollama", "v0.24.0", true, true},
		{"ollama/ollama", "0.24.1", true, false},
		{"ollama/ollama", "0.30.0-rocm", true, false},
		{"ollama/ollama", "latest", false, false},
		{"nvidia/cuda", "13.0.1-runtime-ubuntu24.04", true, false},
		{"nvidia/cuda", "12.6.3-runtime-ubuntu22.04", true, true},
		{"pytorch/pytorch", "2.11.0-cuda12.8-cudnn9-runtime", true, false},
		{"pytorch/pytorch", "2.5.1-cuda12.4-cudnn9-runtime", true, true},
		{"vllm/vllm-openai", "v0.10.1", true, false},
		{"vllm/vllm-openai", "v0.8.5", false, false},
	} {
		_, rule, ok := s.Images[c.repo].Match(c.tag)
		if ok != c.known || (ok && rule.RunsOn(volta) != c.runs) {
			t.Errorf("%s:%s: known %v runs %v; want %v %v", c.repo, c.tag, ok, ok && rule.RunsOn(volta), c.known, c.runs)
		}
	}
}

// The KV cache of llama3.2:3b at 16384 tokens in f16 is 2 × 28 × 8 × 128 ×
// 16384 × 2 bytes = 1792 MiB.
func TestKVCache(t *testing.T) {
	l := Builtin().LLMs["llama3.2:3b"]
	if got := l.KVCacheBytes(16384, "f16"); got != 1792<<20 {
		t.Errorf("f16 KV cache = %d, want %d", got, 1792<<20)
	}
	if got := l.KVCacheBytes(16384, "q8_0"); got != 952<<20 {
		t.Errorf("q8_0 KV cache = %d, want %d", got, 952<<20)
	}
	if r, ok := Builtin().RuntimeFor("ollama/ollama"); !ok || r.ContextEnv != "OLLAMA_CONTEXT_LENGTH" || r.DefaultContext != 4096 {
		t.Errorf("ollama runtime = %+v, %v", r, ok)
	}
}

// The built-in MIG profiles are NVIDIA's: names, memory as NVML reports
// it, compute slices and instances per GPU, for every model with MIG.
func TestBuiltinMIGProfiles(t *testing.T) {
	models := BuiltinGPUModels()
	for _, c := range []struct {
		model, profile string
		memoryMiB      int64
		slices, perGPU int
		percent        int
	}{
		{"NVIDIA A100-SXM4-40GB", "1g.5gb", 4864, 1, 7, 14},
		{"NVIDIA A100-SXM4-40GB", "3g.20gb", 19968, 3, 2, 43},
		{"NVIDIA A100-PCIE-40GB", "7g.40gb", 40192, 7, 1, 100},
		{"NVIDIA A100-SXM4-80GB", "1g.10gb", 9728, 1, 7, 14},
		{"NVIDIA A100 80GB PCIe", "2g.20gb", 19968, 2, 3, 29},
		{"NVIDIA A30", "1g.6gb", 5836, 1, 4, 25},
		{"NVIDIA A30", "2g.12gb+me", 11672, 2, 1, 50},
		{"NVIDIA H100 80GB HBM3", "1g.10gb", 9984, 1, 7, 14},
		{"NVIDIA H100 PCIe", "4g.40gb", 40448, 4, 1, 57},
	} {
		m := models[c.model]
		p, ok := m.MIGProfile(c.profile)
		if !ok || p.MemoryMiB != c.memoryMiB || p.ComputeSlices != c.slices || p.PerGPU != c.perGPU || m.ComputePercent(p) != c.percent {
			t.Errorf("%s %s = %+v (%d %%), %v; want %d MiB, %d slices, %d per GPU, %d %%", c.model, c.profile, p, m.ComputePercent(p), ok, c.memoryMiB, c.slices, c.perGPU, c.percent)
		}
	}
	// no instance holds more than its GPU
	for _, name := range models.MIGModels() {
		m := models[name]
		for _, p := range m.MIG.Profiles {
			if p.MemoryMiB > m.MemoryMiB {
				t.Errorf("%s %s has %d MiB, more than the GPU's %d", name, p.Name, p.MemoryMiB, m.MemoryMiB)
			}
		}
	}
	if v100 := models["Tesla V100-PCIE-32GB"]; v100.MIG != nil || len(v100.MIGProfileNames()) != 0 {
		t.Errorf("a V100 has no MIG, got %+v", v100.MIG)
	}
	if got := len(models.MIGModels()); got != 7 {
		t.Errorf("models with MIG: %v, want the A100s (4), A30 and H100s (2)", models.MIGModels())
	}
}

// A user's file adds MIG profiles to a model of its own, and replacing a
// built-in model's row keeps the model's profiles; a bad row names the file,
// the row and the field.
func TestLoadMIGProfiles(t *testing.T) {
	good := writeFile(t, "mine.yaml", `version: 1
gpu_models:
  - {name: My MIG GPU, memory_mib: 49152, compute_capability: "9.0"}
  - {name: NVIDIA A30, memory_mib: 24000, compute_capability: "8.0"}
mig_profiles:
  - gpu_model: My MIG GPU
    compute_slices: 4
    profiles:
      - {name: 1g.12gb, memory_mib: 11904, compute_slices: 1, per_gpu: 4}
`)
	s, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := s.GPUModels["My MIG GPU"].MIGProfile("1g.12gb"); !ok || p.MemoryMiB != 11904 {
		t.Errorf("user profile = %+v, %v", p, ok)
	}
	if a30 := s.GPUModels["NVIDIA A30"]; a30.MemoryMiB != 24000 || len(a30.MIGProfileNames()) != 5 {
		t.Errorf("replaced A30 row = %d MiB with profiles %v; want the new memory and the built-in profiles", a30.MemoryMiB, a30.MIGProfileNames())
	}

	for _, c := range []struct{ body, want string }{
		{"version: 1\nmig_profiles:\n  - {gpu_model: Unknown GPU, compute_slices: 7, profiles: [{name: 1g.5gb, memory_mib: 1, compute_slices: 1, per_gpu: 1}]}\n", `gpu_model "Unknown GPU" has no row in gpu_models`},
		{"version: 1\nmig_profiles:\n  - {gpu_model: NVIDIA A30, compute_slices: 4, profiles: [{name: 1g-6gb, memory_mib: 1, compute_slices: 1, per_gpu: 1}]}\n", `name "1g-6gb"`},
		{"version: 1\nmig_profiles:\n  - {gpu_model: NVIDIA A30, compute_slices: 4, profiles: [{name: 8g.6gb, memory_mib: 1, compute_slices: 8, per_gpu: 1}]}\n", "compute_slices must be 1 to the GPU's 4"},
		{"version: 1\nmig_profiles:\n  - {gpu_model: NVIDIA A30, compute_slices: 4, profiles: [{name: 1g.6gb, memory_mib: 1, compute_slices: 1, per_gpu: 5}]}\n", "per_gpu must be 1 to 4"},
		{"version: 1\nmig_profiles:\n  - {gpu_model: NVIDIA A30, compute_slices: 4, profiles: [{name: 1g.6gb, memory_mb: 1}]}\n", "memory_mb"},
		{"version: 1\nmig_profiles:\n  - {gpu_model: NVIDIA A30, compute_slices: 4, profiles: []}\n", "mig_profiles[0] (NVIDIA A30): profiles is empty"},
	} {
		bad := writeFile(t, "bad.yaml", c.body)
		if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want the file and %q named", c.body, err, c.want)
		}
	}
}
