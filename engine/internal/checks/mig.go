package checks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// migMissing says why no node gives the MIG package's instances when the
// cluster publishes slices but none of its profile and model, "" when one
// does or the cluster publishes nothing yet (no node plugin: nothing to
// tell).
func (c *checker) migMissing(p *spec.Package) string {
	f := c.facts
	if len(f.Published) == 0 || f.PublishedMIG[p.GPUModel][p.MIGProfile] > 0 {
		return ""
	}
	create := fmt.Sprintf("put the %s GPUs of a node in MIG mode with %s instances (nvidia-smi -mig 1, then nvidia-smi mig -cgi %s -C) and restart its node plugin, or use a profile the nodes have",
		p.GPUModel, p.MIGProfile, p.MIGProfile)
	if profiles := f.PublishedMIG[p.GPUModel]; len(profiles) > 0 {
		return fmt.Sprintf("the nodes with %s GPUs in MIG mode publish MIG instances of %s only, none of %s; %s", p.GPUModel, countList(profiles), p.MIGProfile, create)
	}
	if kinds := f.Published[p.GPUModel]; len(kinds) > 0 {
		return fmt.Sprintf("the nodes with %s GPUs publish %s devices only: none of their GPUs is in MIG mode; %s", p.GPUModel, strings.Join(sortedKeys(kinds), " and "), create)
	}
	return fmt.Sprintf("no node publishes %s GPUs (the cluster's nodes publish %s); add a node with %s GPUs in MIG mode with %s instances, or use a GPU model the nodes have",
		p.GPUModel, strings.Join(sortedKeys(f.Published), ", "), p.GPUModel, p.MIGProfile)
}

// countList is "7 × 1g.5gb and 2 × 3g.20gb".
func countList(counts map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(counts) {
		parts = append(parts, fmt.Sprintf("%d × %s", counts[k], k))
	}
	return strings.Join(parts, " and ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
