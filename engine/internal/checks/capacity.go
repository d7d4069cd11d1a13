package checks

import "sort"

// capacity: are the package's slices free in the cluster now? Not an
// error: the workload waits in Pending until they free, which may be what
// the user wants, but they should know before apply. A pod's devices are
// all on one node, so a pod of gpus_per_pod = N needs N free on one node.
func (c *checker) capacity() {
	if c.facts.FreeSlices == nil {
		return
	}
	free := map[string]map[string]int64{}
	for pkg, nodes := range c.facts.FreeByNode {
		free[pkg] = map[string]int64{}
		for n, k := range nodes {
			free[pkg][n] = k
		}
	}
	for _, w := range c.stack.Workloads {
		want := c.facts.wanted(w)
		nodes, known := free[w.Package]
		if !known || want <= 0 {
			continue
		}
		per := int64(w.DevicesPerPod())
		var total int64
		for _, k := range nodes {
			total += k
		}
		fit := place(nodes, per, want)
		switch {
		case fit >= want:
		case per > 1:
			c.warnf(w, "gpus_per_pod", "Not enough free GPUs on one node now",
				"each pod needs %d free %s slices on one node; %d of the %d pods fit the free slices now (%d free in the cluster), the rest will wait in Pending until slices free",
				per, w.Package, fit, want, total)
		case total == 0:
			c.warnf(w, "package", "No free slice now",
				"no free %s slice in the cluster now; the workload will wait in Pending until one frees", w.Package)
		default:
			c.warnf(w, "package", "Not enough free slices now",
				"%d free %s slices in the cluster now and this workload wants %d; the rest will wait in Pending until slices free", total, w.Package, want)
		}
	}
}

// place puts up to pods pods of per slices each on the nodes' free slices,
// fullest node first (as a scheduler packing GPUs would), takes what they
// use, and returns how many fit.
func place(nodes map[string]int64, per, pods int64) int64 {
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if nodes[names[i]] != nodes[names[j]] {
			return nodes[names[i]] > nodes[names[j]]
		}
		return names[i] < names[j]
	})
	var placed int64
	for _, n := range names {
		k := min(nodes[n]/per, pods-placed)
		nodes[n] -= k * per
		placed += k
	}
	return placed
}
