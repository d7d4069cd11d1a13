// Package tables loads the data tables under schemas/tables: facts about
// GPU models (and their MIG profiles), container images, language models and serving runtimes, kept
// as versioned YAML rather than code so users can extend them with a file of
// their own (README.md in this folder describes the format).
package tables

import (
	_ "embed"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/hashicorp/go-version"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

var (
	//go:embed gpu-models.yaml
	gpuModelsYAML []byte
	//go:embed mig-profiles.yaml
	migProfilesYAML []byte
	//go:embed images.yaml
	imagesYAML []byte
	//go:embed llms.yaml
	llmsYAML []byte
	//go:embed runtimes.yaml
	runtimesYAML []byte
)

// FormatVersion is the table format this gpuslice reads.
const FormatVersion = 1

// file is one table file: any of the sections, so a user's file can extend
// several tables at once.
type file struct {
	Version     int        `json:"version"`
	GPUModels   []GPUModel `json:"gpu_models"`
	MIGProfiles []MIGModel `json:"mig_profiles"`
	Images      []Image    `json:"images"`
	LLMs        []LLM      `json:"llms"`
	Runtimes    []Runtime  `json:"runtimes"`
}

// Set is every table, keyed for lookup.
type Set struct {
	GPUModels GPUModels
	Images    map[string]Image   // by repository
	LLMs      map[string]LLM     // by name
	Runtimes  map[string]Runtime // by name
}

// Builtin returns the tables shipped with gpuslice.
func Builtin() *Set {
	s := newSet()
	for _, f := range []struct {
		name string
		data []byte
	}{{"gpu-models.yaml", gpuModelsYAML}, {"mig-profiles.yaml", migProfilesYAML}, {"images.yaml", imagesYAML}, {"llms.yaml", llmsYAML}, {"runtimes.yaml", runtimesYAML}} {
		if err := s.add(f.name, f.data); err != nil {
			panic(err) // the embedded tables are tested
		}
	}
	return s
}

// Load returns the built-in tables extended, and overridden row by row, by
// the given files.
func Load(paths ...string) (*Set, error) {
	s := Builtin()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read table file: %w", err)
		}
		if err := s.add(p, data); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// BuiltinGPUModels returns the built-in GPU model table.
func BuiltinGPUModels() GPUModels { return Builtin().GPUModels }

// LoadGPUModels returns the built-in GPU model table extended by files.
func LoadGPUModels(paths ...string) (GPUModels, error) {
	s, err := Load(paths...)
	if err != nil {
		return nil, err
	}
	return s.GPUModels, nil
}

func newSet() *Set {
	return &Set{GPUModels: GPUModels{}, Images: map[string]Image{}, LLMs: map[string]LLM{}, Runtimes: map[string]Runtime{}}
}

func (s *Set) add(name string, data []byte) error {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return fmt.Errorf("%s: %w (the sections are gpu_models, mig_profiles, images, llms, runtimes; see schemas/tables/README.md)", name, err)
	}
	if f.Version != FormatVersion {
		return fmt.Errorf("%s: version %d is not supported (this gpuslice reads version %d)", name, f.Version, FormatVersion)
	}
	for i, m := range f.GPUModels {
		if err := m.check(); err != nil {
			return fmt.Errorf("%s: gpu_models[%d]: %w", name, i, err)
		}
		// a row replacing a model keeps the model's MIG profiles
		m.MIG = s.GPUModels[m.Name].MIG
		s.GPUModels[m.Name] = m
	}
	for i, mig := range f.MIGProfiles {
		if err := mig.check(); err != nil {
			return fmt.Errorf("%s: mig_profiles[%d] (%s): %w", name, i, mig.GPUModel, err)
		}
		m, ok := s.GPUModels[mig.GPUModel]
		if !ok {
			return fmt.Errorf("%s: mig_profiles[%d]: gpu_model %q has no row in gpu_models; add the model there first (in this file or another)", name, i, mig.GPUModel)
		}
		m.MIG = &mig
		s.GPUModels[mig.GPUModel] = m
	}
	for i, im := range f.Images {
		if err := im.compile(); err != nil {
			return fmt.Errorf("%s: images[%d] (%s): %w", name, i, im.Repository, err)
		}
		s.Images[im.Repository] = im
	}
	for i, l := range f.LLMs {
		if err := l.check(); err != nil {
			return fmt.Errorf("%s: llms[%d] (%s): %w", name, i, l.Name, err)
		}
		s.LLMs[l.Name] = l
	}
	for i, r := range f.Runtimes {
		if err := r.check(); err != nil {
			return fmt.Errorf("%s: runtimes[%d] (%s): %w", name, i, r.Name, err)
		}
		s.Runtimes[r.Name] = r
	}
	return nil
}

// RuntimeFor returns the runtime serving images of repository.
func (s *Set) RuntimeFor(repository string) (Runtime, bool) {
	for _, r := range s.Runtimes {
		for _, im := range r.Images {
			if im == repository {
				return r, true
			}
		}
	}
	return Runtime{}, false
}

// GPUModel is one row of gpu_models.
type GPUModel struct {
	Name              string `json:"name"`
	MemoryMiB         int64  `json:"memory_mib"`
	ComputeCapability string `json:"compute_capability"`
	Architecture      string `json:"architecture"`
	// MIG is the model's row of mig_profiles; nil when it has no MIG.
	MIG *MIGModel `json:"-"`
}

func (m GPUModel) check() error {
	switch {
	case strings.TrimSpace(m.Name) == "":
		return fmt.Errorf("name is empty")
	case m.MemoryMiB <= 0:
		return fmt.Errorf("model %q: memory_mib must be positive", m.Name)
	}
	if m.ComputeCapability != "" {
		if _, err := version.NewVersion(m.ComputeCapability); err != nil {
			return fmt.Errorf("model %q: compute_capability %q: write major.minor, e.g. \"7.0\"", m.Name, m.ComputeCapability)
		}
	}
	return nil
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

// Image is one row of images: which GPU generations releases of one image
// repository run on.
type Image struct {
	Repository     string      `json:"repository"`
	VersionFromTag string      `json:"version_from_tag"`
	Rules          []ImageRule `json:"rules"`

	tagPattern *regexp.Regexp
}

// ImageRule says that the versions it matches need at least a compute
// capability.
type ImageRule struct {
	Versions             string `json:"versions"`
	MinComputeCapability string `json:"min_compute_capability"`
	Note                 string `json:"note"`

	constraint version.Constraints
	min        *version.Version
}

const defaultVersionFromTag = `^v?([0-9]+(?:\.[0-9]+)*)`

func (im *Image) compile() error {
	if strings.TrimSpace(im.Repository) == "" {
		return fmt.Errorf("repository is empty")
	}
	pattern := im.VersionFromTag
	if pattern == "" {
		pattern = defaultVersionFromTag
	}
	re, err := regexp.Compile(pattern)
	if err != nil || re.NumSubexp() < 1 {
		return fmt.Errorf("version_from_tag %q: write a regular expression whose first group is the version", pattern)
	}
	im.tagPattern = re
	for i := range im.Rules {
		r := &im.Rules[i]
		if r.constraint, err = version.NewConstraint(r.Versions); err != nil {
			return fmt.Errorf("rules[%d].versions %q: %v (write e.g. \"<= 0.24.0\")", i, r.Versions, err)
		}
		if r.min, err = version.NewVersion(r.MinComputeCapability); err != nil {
			return fmt.Errorf("rules[%d].min_compute_capability %q: write major.minor, e.g. \"7.5\"", i, r.MinComputeCapability)
		}
	}
	return nil
}

// Match finds the rule for an image tag: the version read from the tag, and
// the first rule whose constraint it meets. ok is false when the tag carries
// no version the table can read or no rule covers it.
func (im Image) Match(tag string) (v *version.Version, rule ImageRule, ok bool) {
	m := im.tagPattern.FindStringSubmatch(tag)
	if m == nil {
		return nil, ImageRule{}, false
	}
	v, err := version.NewVersion(m[1])
	if err != nil {
		return nil, ImageRule{}, false
	}
	for _, r := range im.Rules {
		if r.constraint.Check(v) {
			return v, r, true
		}
	}
	return v, ImageRule{}, false
}

// RunsOn reports whether the rule allows a GPU of compute capability cc.
func (r ImageRule) RunsOn(cc *version.Version) bool { return !cc.LessThan(r.min) }

// LLM is one row of llms: what a language model needs in GPU memory.
type LLM struct {
	Name         string  `json:"name"`
	Parameters   float64 `json:"parameters"`
	Quantization string  `json:"quantization"`
	WeightsMiB   int64   `json:"weights_mib"`
	Layers       int64   `json:"layers"`
	KVHeads      int64   `json:"kv_heads"`
	HeadDim      int64   `json:"head_dim"`
	MaxContext   int64   `json:"max_context"`
}

func (l LLM) check() error {
	if strings.TrimSpace(l.Name) == "" {
		return fmt.Errorf("name is empty")
	}
	if l.WeightsMiB <= 0 || l.Layers <= 0 || l.KVHeads <= 0 || l.HeadDim <= 0 {
		return fmt.Errorf("weights_mib, layers, kv_heads and head_dim must all be positive")
	}
	return nil
}

// KVCacheBytesPerElement is the size of one KV cache element by type, as
// ggml stores it (quantised types carry a scale per block of 32).
var KVCacheBytesPerElement = map[string]float64{"f32": 4, "f16": 2, "q8_0": 34.0 / 32, "q4_0": 18.0 / 32}

// KVCacheBytes is the KV cache of context tokens: keys and values for every
// layer and KV head.
func (l LLM) KVCacheBytes(context int64, cacheType string) int64 {
	return int64(2 * float64(l.Layers*l.KVHeads*l.HeadDim*context) * KVCacheBytesPerElement[cacheType])
}

// Runtime is one row of runtimes: a model-serving runtime's needs.
type Runtime struct {
	Name           string   `json:"name"`
	Images         []string `json:"images"`
	MemoryFloor    string   `json:"memory_floor"`
	MemoryRequest  string   `json:"memory_request"`
	MemoryLimit    string   `json:"memory_limit"`
	ContextEnv     string   `json:"context_env"`
	DefaultContext int64    `json:"default_context"`
	KVCacheEnv     string   `json:"kv_cache_env"`
	DefaultKVCache string   `json:"default_kv_cache"`
	GPUOverheadMiB int64    `json:"gpu_overhead_mib"`
	ModelsPath     string   `json:"models_path"`
	ModelsEnv      string   `json:"models_env"`
}

func (r Runtime) check() error {
	if strings.TrimSpace(r.Name) == "" || len(r.Images) == 0 {
		return fmt.Errorf("name and images are required")
	}
	for attr, q := range map[string]string{"memory_floor": r.MemoryFloor, "memory_request": r.MemoryRequest, "memory_limit": r.MemoryLimit} {
		if q == "" {
			continue
		}
		if _, err := resource.ParseQuantity(q); err != nil {
			return fmt.Errorf("%s %q: write a quantity such as \"2Gi\"", attr, q)
		}
	}
	if _, ok := KVCacheBytesPerElement[r.DefaultKVCache]; r.DefaultKVCache != "" && !ok {
		return fmt.Errorf("default_kv_cache %q: use f32, f16, q8_0 or q4_0", r.DefaultKVCache)
	}
	return nil
}
