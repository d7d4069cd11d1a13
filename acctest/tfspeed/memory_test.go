package tfspeed

import (
	"testing"

	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// maxPlanBytesPerObject bounds how much a no-change `gpuslice plan`'s peak
// memory grows with each object the stack renders. Measured by this test
// on 2 cores: 58.4 KiB per object for df149a0, whose plan kept an
// unstructured copy of every live object and the configuration's syntax
// trees and values; 38.3–39.7 KiB on 2026-12-07 once the plan compared
// with the view's objects in place; 23.3–25.7 KiB once the configuration
// was parsed in pieces and kept neither its syntax trees nor the values
// nothing refers to; 7.7–10.7 KiB since the rendered objects are held
// encoded, each piece's syntax tree goes as the piece is read, and the CLI
// collects garbage at 75 % heap growth. Those figures were taken from this
// process's wait, which could not read a peak below this process's own
// (peakrss_test.go); through peakrss, 7.8 KiB (66.4 MiB at 142 objects,
// 75.5 MiB at 1342). The bound is the target of 20 KiB, over twice
// that: it catches such a copy coming back without failing on a busy
// machine. `make bench-peers` has the figures against
// Flux's and kubectl's at 200 and 1000 workloads.
const maxPlanBytesPerObject = 20 << 10

// TestPlanMemoryPerObject is the small version of the peer benchmark that
// make test runs: the CLI as a user runs it, a no-change plan of a stack
// at two sizes on one control plane, and the growth of its peak RSS (the
// kernel's count) per rendered object between them. Each size's figure is
// the smallest of three plans, so that one garbage collection landing late
// does not decide it.
func TestPlanMemoryPerObject(t *testing.T) {
	clustertest.RequireTools(t)
	cli := buildCLI(t)
	c := startCluster(t)
	defer c.Stop()
	dir := t.TempDir()
	measure := func(n int) (objects int, rss int64) {
		if err := configuration(dir, "mem", c.KubeconfigPath, n, "4096"); err != nil {
			t.Fatal(err)
		}
		objects = len(renderedObjects(t, dir))
		run(t, dir, nil, []int{0}, cli, "apply", "-auto-approve", "--kubeconfig", c.KubeconfigPath)
		for range 3 {
			got := run(t, dir, nil, []int{0}, cli, "plan", "-detailed-exitcode", "--kubeconfig", c.KubeconfigPath)
			checkSplit(t, got)
			if rss == 0 || got.rss < rss {
				rss = got.rss
			}
		}
		return objects, rss
	}
	smallObjects, smallRSS := measure(40)
	largeObjects, largeRSS := measure(440)
	perObject := float64(largeRSS-smallRSS) / float64(largeObjects-smallObjects)
	t.Logf("peak RSS of a no-change plan: %d objects %.1f MiB, %d objects %.1f MiB: %.1f KiB per object",
		smallObjects, mib64(smallRSS), largeObjects, mib64(largeRSS), perObject/1024)
	if perObject > maxPlanBytesPerObject {
		t.Errorf("a no-change plan's peak memory grows by %.1f KiB per object, over the bound of %d KiB: %s",
			perObject/1024, maxPlanBytesPerObject>>10, "find what holds it with a heap profile of a large plan (docs/guides/benchmarks.md)")
	}
}

// checkSplit fails t unless peakrss read the plan's anonymous and
// file-backed memory, each within its peak: bench-peers compares the
// anonymous part with the peers'.
func checkSplit(t *testing.T, got took) {
	t.Helper()
	if got.anon <= 0 || got.file <= 0 || got.anon > got.rss || got.file > got.rss {
		t.Errorf("peakrss read anon %d and file %d bytes of a plan that peaked at %d: each should be above zero and at most the peak", got.anon, got.file, got.rss)
	}
}

func mib64(n int64) float64 { return float64(n) / (1 << 20) }
