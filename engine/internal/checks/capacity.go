package checks

// capacity: is a slice of the package free in the cluster now? Not an
// error: the workload waits in Pending until one frees, which may be what
// the user wants, but they should know before apply.
func (c *checker) capacity() {
	if c.facts.FreeSlices == nil {
		return
	}
	free := map[string]int64{}
	for pkg, n := range c.facts.FreeSlices {
		free[pkg] = n
	}
	for _, w := range c.stack.Workloads {
		want := int64(chargedReplicas(w)) - c.facts.Running[w.Namespace+"/"+w.Name].Pods
		n, known := free[w.Package]
		if !known || want <= 0 {
			continue
		}
		switch {
		case n == 0:
			c.warnf(w, "package", "No free slice now",
				"no free %s slice in the cluster now; the workload will wait in Pending until one frees", w.Package)
		case n < want:
			c.warnf(w, "package", "Not enough free slices now",
				"%d free %s slices in the cluster now and this workload wants %d; the rest will wait in Pending until slices free", n, w.Package, want)
		}
		free[w.Package] = max(n-want, 0)
	}
}
