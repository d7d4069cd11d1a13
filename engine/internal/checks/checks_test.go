package checks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// goodStack is the configuration that worked in the field: every check
// passes on it.
func goodStack() *spec.Stack {
	return &spec.Stack{
		Name:     "t",
		Packages: []*spec.Package{{Meta: spec.Meta{Address: "gpuslice_package.small"}, Name: "v100-8gi", GPUModel: "Tesla V100-PCIE-32GB", Fraction: 25, MemoryBytes: 8 << 30}},
		Quotas: []*spec.Quota{{Meta: spec.Meta{Address: "gpuslice_quota.team_a"}, Namespace: "team-a", Slices: map[string]int64{"v100-8gi": 2},
			CPURequests: "4", MemoryRequests: "8Gi", CPULimits: "8", MemoryLimits: "16Gi"}},
		Workloads: []*spec.Workload{{
			Meta: spec.Meta{Address: "gpuslice_workload.ollama"}, Namespace: "team-a", Name: "ollama", Package: "v100-8gi", Kind: spec.KindDeployment, Replicas: 1,
			Container: spec.Container{Image: "ollama/ollama:0.24.0", Env: map[string]string{"OLLAMA_CONTEXT_LENGTH": "16384"},
				CPURequest: "1", MemoryRequest: "2Gi", CPULimit: "2", MemoryLimit: "4Gi"},
			ModelVolume:   &spec.ModelVolume{Size: "20Gi", MountPath: "/root/.ollama", AccessMode: "ReadWriteOnce"},
			PreloadModels: []string{"llama3.2:3b"},
			Model:         &spec.Model{Name: "llama3.2:3b", ContextLength: 16384},
		}},
	}
}

func emptyFacts() *Facts {
	return &Facts{ComputeCapability: map[string]string{}, Packages: map[string]*Package{}, Quotas: map[string][]Quota{},
		LimitRanges: map[string]bool{}, Running: map[string]Usage{}}
}

// short renders diagnostics as "Severity attribute: Summary" lines.
func short(ds diag.Diagnostics) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s %s: %s", d.Severity, d.Attribute, d.Summary))
	}
	return out
}

type checkCase struct {
	name   string
	change func(s *spec.Stack, w *spec.Workload)
	facts  func(f *Facts)
	want   []string
	detail string // a part of the first diagnostic's detail
}

func runCases(t *testing.T, cases []checkCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := goodStack()
			if c.change != nil {
				c.change(s, s.Workloads[0])
			}
			f := emptyFacts()
			if c.facts != nil {
				c.facts(f)
			}
			got := Run(s, tables.Builtin(), f, "")
			if diff := cmp.Diff(c.want, short(got)); diff != "" {
				t.Fatalf("diagnostics (-want +got):\n%s\nall: %v", diff, got)
			}
			if c.detail != "" && !strings.Contains(got[0].Detail, c.detail) {
				t.Errorf("detail %q does not say %q", got[0].Detail, c.detail)
			}
			for _, d := range got {
				if d.Address != "gpuslice_workload.ollama" {
					t.Errorf("%s: address %q", d.Summary, d.Address)
				}
			}
		})
	}
}

func TestGoodStackIsClean(t *testing.T) {
	runCases(t, []checkCase{{name: "field config", want: nil}})
}

func TestImageCheck(t *testing.T) {
	image := func(ref string) func(*spec.Stack, *spec.Workload) {
		return func(_ *spec.Stack, w *spec.Workload) { w.Container.Image = ref }
	}
	runCases(t, []checkCase{
		{name: "newer ollama", change: image("ollama/ollama:0.30.0"),
			want:   []string{"Error container.image: Image does not run on this GPU"},
			detail: `ollama/ollama 0.30.0 needs compute capability 7.5 or newer, and package "v100-8gi" is a Tesla V100-PCIE-32GB (compute capability 7.0): later releases have been seen`},
		{name: "registry and digest", change: image("docker.io/ollama/ollama:0.24.0@sha256:abc"), want: nil},
		{name: "mirror", change: image("registry.example:5000/ollama/ollama:0.31.1"),
			want: []string{"Error container.image: Image does not run on this GPU"}},
		{name: "latest", change: image("ollama/ollama:latest"),
			want: []string{"Warning container.image: Unpinned image"}, detail: "Pin a version known to run there"},
		{name: "no tag", change: image("ollama/ollama"),
			want: []string{"Warning container.image: Unpinned image"}},
		{name: "CUDA 13", change: image("nvidia/cuda:13.0.1-runtime-ubuntu24.04"),
			want: []string{"Error container.image: Image does not run on this GPU"}, detail: "CUDA 13 dropped sm_70"},
		{name: "PyTorch cu128", change: image("pytorch/pytorch:2.11.0-cuda12.8-cudnn9-runtime"),
			want: []string{"Error container.image: Image does not run on this GPU"}, detail: "only the cu126 builds keep Volta"},
		{name: "vLLM", change: image("vllm/vllm-openai:v0.10.1"),
			want: []string{"Error container.image: Image does not run on this GPU"}, detail: "vllm #19185"},
		{name: "unknown image", change: image("example/llm-server:1.0"),
			want: []string{"Warning container.image: Image not known to run on this GPU"}, detail: "test it on a Tesla V100-PCIE-32GB (compute capability 7.0)"},
		{name: "unreadable tag", change: image("nvidia/cuda:devel"),
			want: []string{"Warning container.image: Image version unknown"}},
		{name: "compute capability from the cluster wins", change: image("ollama/ollama:0.30.0"),
			facts: func(f *Facts) { f.ComputeCapability["Tesla V100-PCIE-32GB"] = "8.0.0" }, want: nil},
		{name: "GPU not in any table", change: func(s *spec.Stack, _ *spec.Workload) { s.Packages[0].GPUModel = "Mystery GPU" },
			want: []string{"Warning container.image: GPU generation unknown"}},
	})
}

func TestMemoryCheck(t *testing.T) {
	runCases(t, []checkCase{
		{name: "below the floor", change: func(_ *spec.Stack, w *spec.Workload) {
			w.Container.MemoryRequest, w.Container.MemoryLimit = "512Mi", "512Mi"
		},
			want:   []string{"Warning container.memory_limit: Container RAM limit too low for ollama"},
			detail: `memory_limit 512Mi is below the 2Gi ollama needs on the host side while it loads a model: the container is OOMKilled (exit code 137) and restarts in a loop. Known good: memory_request = "2Gi", memory_limit = "4Gi"`},
		{name: "at the floor", change: func(_ *spec.Stack, w *spec.Workload) { w.Container.MemoryLimit = "2Gi" }, want: nil},
		{name: "not a known runtime", change: func(_ *spec.Stack, w *spec.Workload) {
			w.Container.Image, w.Container.MemoryLimit, w.Container.MemoryRequest = "nvidia/cuda:12.6.3-runtime-ubuntu22.04", "256Mi", "256Mi"
		}, want: nil},
	})
}

func TestFitCheck(t *testing.T) {
	ctx := func(n string) func(*spec.Stack, *spec.Workload) {
		return func(_ *spec.Stack, w *spec.Workload) {
			w.Container.Env["OLLAMA_CONTEXT_LENGTH"] = n
			w.Model.ContextLength = 0
		}
	}
	runCases(t, []checkCase{
		{name: "131072 does not fit 8 GiB", change: ctx("131072"),
			want:   []string{`Error container.env["OLLAMA_CONTEXT_LENGTH"]: Model does not fit the slice`},
			detail: "llama3.2:3b needs about 16.4 GiB of GPU memory — weights 1.9 GiB + KV cache 14.0 GiB (131072 tokens, f16) + ollama's overhead 0.5 GiB — and a v100-8gi slice has 8.0 GiB. At most about 52224 tokens fit with a f16 KV cache (98304 with q8_0)"},
		{name: "fits with q8_0", change: func(s *spec.Stack, w *spec.Workload) {
			ctx("65536")(s, w)
			w.Container.Env["OLLAMA_KV_CACHE_TYPE"] = "q8_0"
		}, want: nil},
		{name: "nearly full", change: ctx("49152"),
			want: []string{`Warning container.env["OLLAMA_CONTEXT_LENGTH"]: Model nearly fills the slice`}, detail: "(95%)"},
		{name: "bigger package", change: func(s *spec.Stack, w *spec.Workload) {
			ctx("131072")(s, w)
			s.Packages[0].MemoryBytes = 32 << 30
		}, want: nil},
		{name: "runtime default context", change: func(_ *spec.Stack, w *spec.Workload) {
			delete(w.Container.Env, "OLLAMA_CONTEXT_LENGTH")
			w.Model.ContextLength = 0
		}, want: []string{"Warning container.env: Context left at the runtime default"}, detail: "ollama uses 4096 tokens and silently truncates longer prompts"},
		{name: "declared but not passed", change: func(_ *spec.Stack, w *spec.Workload) { delete(w.Container.Env, "OLLAMA_CONTEXT_LENGTH") },
			want:   []string{"Warning model.context_length: Context length not passed to ollama"},
			detail: `add OLLAMA_CONTEXT_LENGTH = "16384" to container.env`},
		{name: "two values", change: func(_ *spec.Stack, w *spec.Workload) { w.Model.ContextLength = 8192 },
			want: []string{"Warning model.context_length: Two context lengths"}},
		{name: "not a number", change: ctx("16k"),
			want: []string{`Error container.env["OLLAMA_CONTEXT_LENGTH"]: Invalid context length`}},
		{name: "unknown model", change: func(_ *spec.Stack, w *spec.Workload) { w.Model.Name = "my-finetune:7b" },
			want: []string{"Warning model.name: Model not known"}},
		{name: "preloaded models are checked without a model block", change: func(_ *spec.Stack, w *spec.Workload) {
			w.Model = nil
			w.Container.Env["OLLAMA_CONTEXT_LENGTH"] = "131072"
		}, want: []string{`Error container.env["OLLAMA_CONTEXT_LENGTH"]: Model does not fit the slice`}},
		{name: "context beyond the model", change: ctx("262144"),
			want: []string{`Warning container.env["OLLAMA_CONTEXT_LENGTH"]: Context longer than the model's`, `Error container.env["OLLAMA_CONTEXT_LENGTH"]: Model does not fit the slice`}},
	})
}

func TestStorageCheck(t *testing.T) {
	runCases(t, []checkCase{
		{name: "no volume", change: func(_ *spec.Stack, w *spec.Workload) { w.ModelVolume = nil },
			want:   []string{"Warning model_volume: Models are not kept"},
			detail: `every pod restart, even one caused by an env change, deletes the downloaded models and pulls them again. Add model_volume { size = "20Gi", mount_path = "/root/.ollama" }`},
		{name: "volume elsewhere", change: func(_ *spec.Stack, w *spec.Workload) { w.ModelVolume.MountPath = "/models" },
			want: []string{"Warning model_volume.mount_path: Volume not where the models are"}},
		{name: "models moved by env", change: func(_ *spec.Stack, w *spec.Workload) {
			w.ModelVolume.MountPath = "/models"
			w.Container.Env["OLLAMA_MODELS"] = "/models/ollama"
		}, want: nil},
		{name: "no models at all", change: func(_ *spec.Stack, w *spec.Workload) {
			w.Container.Image, w.ModelVolume, w.PreloadModels, w.Model = "nvidia/cuda:12.6.3-runtime-ubuntu22.04", nil, nil, nil
		}, want: nil},
	})
}

func quota(hard, used map[string]string) Quota {
	q := Quota{Name: render.QuotaName, Hard: corev1.ResourceList{}, Used: corev1.ResourceList{}}
	for k, v := range hard {
		q.Hard[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	for k, v := range used {
		q.Used[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return q
}

func TestQuotaCheck(t *testing.T) {
	live := func(hard, used map[string]string) func(*Facts) {
		return func(f *Facts) { f.Quotas["team-a"] = []Quota{quota(hard, used)} }
	}
	noStackQuota := func(s *spec.Stack, _ *spec.Workload) { s.Quotas = nil }
	slices := "v100-8gi.deviceclass.resource.k8s.io/devices"
	runCases(t, []checkCase{
		{name: "desired quota, nothing used", facts: live(nil, nil), want: nil},
		{name: "cpu exhausted", change: noStackQuota,
			facts:  live(map[string]string{"requests.cpu": "4", slices: "2"}, map[string]string{"requests.cpu": "3500m"}),
			want:   []string{"Error container.cpu_request: Not enough quota"},
			detail: "ResourceQuota gpuslice in team-a has 500m of requests.cpu left (hard 4); this workload needs 1050m (1 × 1 + the preload Job). The pods would be refused"},
		{name: "stack raises the quota", change: func(s *spec.Stack, _ *spec.Workload) { s.Quotas[0].CPURequests = "8" },
			facts: live(map[string]string{"requests.cpu": "4"}, map[string]string{"requests.cpu": "3500m"}), want: nil},
		{name: "update gives back what it holds",
			facts: func(f *Facts) {
				live(map[string]string{"requests.cpu": "1100m"}, map[string]string{"requests.cpu": "1"})(f)
				f.Running["team-a/ollama"] = Usage{Pods: 1, Resources: corev1.ResourceList{"requests.cpu": resource.MustParse("1")}}
			}, change: noStackQuota, want: nil},
		{name: "two replicas of memory", change: func(s *spec.Stack, w *spec.Workload) {
			s.Quotas[0].MemoryRequests = "3Gi"
			w.Replicas, w.Kind, w.ModelVolume.AccessMode = 2, spec.KindStatefulSet, "ReadWriteOnce"
		}, facts: live(nil, nil), want: []string{"Error container.memory_request: Not enough quota"}, detail: "needs 4128Mi (2 × 2Gi + the preload Job)"},
		{name: "request the quota demands is missing", change: func(_ *spec.Stack, w *spec.Workload) { w.Container.CPULimit = "" },
			facts: live(nil, nil), want: []string{"Error container.cpu_limit: Quota needs limits.cpu"}},
		{name: "a LimitRange defaults it", change: func(_ *spec.Stack, w *spec.Workload) { w.Container.CPULimit = "" },
			facts: func(f *Facts) { f.LimitRanges["team-a"] = true }, want: nil},
		{name: "scaled to zero needs nothing of an overdrawn quota", change: func(s *spec.Stack, w *spec.Workload) {
			s.Quotas, w.Replicas, w.PreloadModels = nil, 0, nil
		}, facts: live(map[string]string{"requests.cpu": "4", slices: "2"}, map[string]string{"requests.cpu": "5"}), want: nil},
		{name: "slices held", change: noStackQuota,
			facts: live(map[string]string{slices: "2"}, map[string]string{slices: "2"}),
			want:  []string{"Warning package: Slices already held"}, detail: "2 of 2 v100-8gi slices already held in team-a: this workload will wait"},
		{name: "package not granted", change: func(s *spec.Stack, _ *spec.Workload) { s.Quotas[0].Slices = map[string]int64{} },
			facts: live(nil, nil), want: []string{"Error package: Package not granted"}},
		{name: "workloads of one namespace share it", change: func(s *spec.Stack, w *spec.Workload) {
			s.Quotas[0].CPURequests = "1500m"
			second := *w
			second.Name, second.Address, second.PreloadModels = "second", "gpuslice_workload.ollama", nil
			s.Workloads = append(s.Workloads, &second)
		}, facts: live(nil, nil), want: []string{"Error container.cpu_request: Not enough quota"}, detail: "has 450m of requests.cpu left"},
	})
}

func TestCapacityCheck(t *testing.T) {
	runCases(t, []checkCase{
		{name: "none free", facts: func(f *Facts) { freeOn(f, "v100-8gi", map[string]int64{"n1": 0}) },
			want: []string{"Warning package: No free slice now"}, detail: "no free v100-8gi slice in the cluster now; the workload will wait in Pending until one frees"},
		{name: "one free", facts: func(f *Facts) { freeOn(f, "v100-8gi", map[string]int64{"n1": 1}) }, want: nil},
		{name: "already running", facts: func(f *Facts) {
			freeOn(f, "v100-8gi", map[string]int64{"n1": 0})
			f.Running["team-a/ollama"] = Usage{Pods: 1, Slices: 1}
		}, want: nil},
	})
}

func TestSkippedWithoutCluster(t *testing.T) {
	s := goodStack()
	s.Workloads[0].Container.Image = "ollama/ollama:0.30.0"
	got := short(Run(s, tables.Builtin(), nil, "the cluster is not reachable: dial tcp: connection refused"))
	want := []string{"Error container.image: Image does not run on this GPU", "Warning : Cluster checks skipped"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("offline checks (-want +got):\n%s", diff)
	}
}
