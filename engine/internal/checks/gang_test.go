package checks

import (
	"testing"

	"github.com/gpuslice/gpuslice/engine/spec"
)

func freeOn(f *Facts, pkg string, nodes map[string]int64) {
	if f.FreeSlices == nil {
		f.FreeSlices, f.FreeByNode = map[string]int64{}, map[string]map[string]int64{}
	}
	f.FreeByNode[pkg] = nodes
	for _, n := range nodes {
		f.FreeSlices[pkg] += n
	}
}

// wholeGPUStack turns goodStack's workload into a training job on whole
// V100s: workers × gpus per pod, with a quota of grant whole GPUs.
func wholeGPUStack(workers, perPod int32, grant int64) func(*spec.Stack, *spec.Workload) {
	return func(s *spec.Stack, w *spec.Workload) {
		s.Packages[0].Name, s.Packages[0].Fraction, s.Packages[0].MemoryBytes = "v100-32gi", 100, 32<<30
		s.Quotas[0].Slices = map[string]int64{"v100-32gi": grant}
		s.Quotas[0].CPURequests, s.Quotas[0].CPULimits, s.Quotas[0].MemoryRequests, s.Quotas[0].MemoryLimits = "64", "64", "256Gi", "256Gi"
		w.Package, w.GPUsPerPod, w.Workers = "v100-32gi", perPod, workers
		w.Container.Image, w.ModelVolume, w.PreloadModels, w.Model = "nvidia/cuda:12.6.3-runtime-ubuntu22.04", nil, nil, nil
		w.Container.Env = nil
		if workers > 1 {
			w.Kind = spec.KindJob
		}
	}
}

func TestMultiGPUChecks(t *testing.T) {
	const slices = "v100-32gi.deviceclass.resource.k8s.io/devices"
	runCases(t, []checkCase{
		{name: "four GPUs granted four", change: wholeGPUStack(1, 4, 4), facts: func(*Facts) {}, want: nil},
		{name: "fractional package", change: func(_ *spec.Stack, w *spec.Workload) { w.GPUsPerPod = 2 },
			want:   []string{"Error gpus_per_pod: Several slices of a fractional package"},
			detail: "gpuslice_workload.ollama asks for 2 devices of v100-8gi per pod, but v100-8gi is 25 % of a GPU: a fractional slice's memory and compute limits are one budget on one GPU"},
		{name: "fractional package from the cluster", change: func(s *spec.Stack, w *spec.Workload) { w.GPUsPerPod, s.Packages = 2, nil },
			facts: func(f *Facts) {
				f.Packages["v100-8gi"] = &Package{Name: "v100-8gi", GPUModel: "Tesla V100-PCIE-32GB", Fraction: 25, MemoryBytes: 8 << 30}
			},
			want: []string{"Error gpus_per_pod: Several slices of a fractional package"}},
		{name: "four GPUs granted three", change: wholeGPUStack(1, 4, 3), facts: func(*Facts) {},
			want:   []string{"Error gpus_per_pod: More GPUs per pod than granted"},
			detail: "each pod's claim asks for 4 v100-32gi slices but ResourceQuota gpuslice in team-a grants 3, so the claims are refused"},
		{name: "gang fits", change: wholeGPUStack(3, 2, 6), facts: func(*Facts) {}, want: nil},
		{name: "gang does not fit the grant", change: wholeGPUStack(3, 2, 4), facts: func(*Facts) {},
			want:   []string{"Error workers: Gang does not fit the quota"},
			detail: "3 workers × 2 v100-32gi slices need 6, but ResourceQuota gpuslice in team-a grants 4: a gang that only partly fits deadlocks"},
		{name: "gang after the stack's other workloads", change: func(s *spec.Stack, w *spec.Workload) {
			wholeGPUStack(2, 1, 3)(s, w)
			first := *w
			first.Name, first.Kind, first.Workers, first.GPUsPerPod = "first", spec.KindDeployment, 1, 2
			s.Workloads = []*spec.Workload{&first, w}
		}, facts: func(*Facts) {},
			want:   []string{"Error workers: Gang does not fit the quota"},
			detail: "grants 3 and the stack's workloads before it take 2"},
		{name: "gang fits the grant, other teams' pods hold it now", change: func(s *spec.Stack, w *spec.Workload) {
			wholeGPUStack(2, 2, 4)(s, w)
			s.Quotas = nil
		}, facts: func(f *Facts) {
			f.Quotas["team-a"] = []Quota{quota(map[string]string{slices: "4"}, map[string]string{slices: "2"})}
		}, want: []string{"Warning package: Slices already held"}},
		{name: "no node has four free", change: wholeGPUStack(1, 4, 4),
			facts:  func(f *Facts) { freeOn(f, "v100-32gi", map[string]int64{"a": 3, "b": 2}) },
			want:   []string{"Warning gpus_per_pod: Not enough free GPUs on one node now"},
			detail: "each pod needs 4 free v100-32gi slices on one node; 0 of the 1 pods fit the free slices now (5 free in the cluster)"},
		{name: "four free on one node", change: wholeGPUStack(1, 4, 4),
			facts: func(f *Facts) { freeOn(f, "v100-32gi", map[string]int64{"a": 3, "b": 4}) }, want: nil},
		{name: "gang fits the free slices only in part", change: wholeGPUStack(3, 2, 6),
			facts: func(f *Facts) { freeOn(f, "v100-32gi", map[string]int64{"a": 3, "b": 2}) },
			want:  []string{"Warning gpus_per_pod: Not enough free GPUs on one node now"}, detail: "2 of the 3 pods fit"},
	})
}
