package main

import "runtime/debug"

// gcPercent is the garbage collector's target when GOGC is not set: the
// heap may grow 75 % over what is live before a collection, not Go's
// default 100 %. A plan or apply of thousands of workloads peaks while its
// configuration loads and the cluster's objects arrive, at once, and most
// of what that allocates is garbage as soon as it is read: at 1000
// workloads this lowered a no-change plan's peak RSS by 6–7 MiB (7 %) for
// 6–12 % more CPU time in two interleaved runs (docs/guides/benchmarks.md).
// GOGC, when set, decides.
const gcPercent = 75

func setGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}
