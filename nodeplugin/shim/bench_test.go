package shim_test

import (
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

// BenchmarkShimOverhead measures, in one run, what the library adds to an
// intercepted cuMemAlloc_v2+cuMemFree_v2 pair and to an unthrottled
// cuLaunchKernel (compute share 100 %): the same program, linked against the
// (simulated) driver, with and without the library preloaded; each figure is
// the best of 5 rounds of 200,000 calls. Reported as metrics, never asserted:
// run with go test -run '^$' -bench ShimOverhead ./nodeplugin/shim/
func BenchmarkShimOverhead(b *testing.B) {
	e := shimtest.NewEnv(b, slice)
	best := map[bool][2]float64{}
	for i := 0; i < b.N; i++ {
		for _, preload := range []bool{false, true} {
			out, err := e.Command(preload, "gs_linked", "bench", "200000").CombinedOutput()
			if err != nil {
				b.Fatalf("bench (preload %v): %v\n%s", preload, err, out)
			}
			var alloc, launch float64
			for _, l := range splitLines(string(out)) {
				parseFloat(l, "alloc_free_ns ", &alloc)
				parseFloat(l, "launch_ns ", &launch)
			}
			if alloc == 0 || launch == 0 {
				b.Fatalf("bench printed %q", out)
			}
			cur, seen := best[preload]
			if !seen || alloc < cur[0] {
				cur[0] = alloc
			}
			if !seen || launch < cur[1] {
				cur[1] = launch
			}
			best[preload] = cur
		}
	}
	b.ReportMetric(best[false][0], "ns-without/alloc+free")
	b.ReportMetric(best[true][0]-best[false][0], "ns-added/alloc+free")
	b.ReportMetric(best[false][1], "ns-without/launch")
	b.ReportMetric(best[true][1]-best[false][1], "ns-added/launch")
}
