package driver

import (
	"slices"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
)

// strandedMemory is, by GPU UUID, the memory of each GPU that is free but
// that no slice of any package can use (gpuslice_gpu_stranded_memory_bytes),
// and false while the DeviceClass cache is not filled yet: the packages
// are not known then, and every free byte would look stranded.
func (p *Plugin) strandedMemory() (map[string]uint64, bool) {
	pkgs, ok := p.classes.packages()
	if !ok {
		return nil, false
	}
	held := map[string][]checkpoint.Device{}
	p.mu.Lock()
	for _, c := range p.prepared {
		for _, d := range c.Devices {
			held[d.GPUUUID] = append(held[d.GPUUUID], d)
		}
	}
	p.mu.Unlock()
	out := make(map[string]uint64, len(p.gpus))
	for _, g := range p.gpus {
		out[g.UUID] = stranded(g, held[g.UUID], pkgs, p.cfg.Publish)
	}
	return out, true
}

// stranded is the free memory of g, which holds the devices held, that no
// slice of pkgs can take, even combined, given what is held. A GPU serves
// one kind of slice at a time (publish: its first slice charges the other
// kinds' counters in full), so the kind it serves decides:
//
//   - partitions: the GPU's percent not held, less the most of it that
//     partitions of packaged fractions the node publishes add up to;
//   - any-size: the any-size device's memory not held, less the most of it
//     that any-size packages of the model fill within the compute left;
//   - MIG: the memory of free instances of a profile no package offers
//     (instances are created by the operator; memory outside them is
//     the MIG layout's, not stranded by allocations);
//   - time-sliced: none; its claims share all of the GPU's memory.
//
// A GPU that holds no slice strands nothing: all of its memory is free for
// whichever package fits, and packages that do not divide it are a matter
// of their sizes, not of fragmentation.
func stranded(g discovery.GPU, held []checkpoint.Device, pkgs []slicePackage, o publish.Options) uint64 {
	if len(held) == 0 {
		return 0
	}
	var mine []slicePackage
	for _, pkg := range pkgs {
		if pkg.model == g.Name {
			mine = append(mine, pkg)
		}
	}
	sharing := func(kind string) bool {
		return slices.ContainsFunc(held, func(d checkpoint.Device) bool { return d.Sharing == kind })
	}
	switch {
	case g.MIGEnabled:
		return strandedMIG(g, held, mine)
	case sharing(contract.SharingTimeSliced):
		return 0
	case sharing(contract.SharingAnySize):
		return strandedAnySize(g, held, mine)
	}
	return strandedPartitions(g, held, mine, o)
}

func strandedPartitions(g discovery.GPU, held []checkpoint.Device, pkgs []slicePackage, o publish.Options) uint64 {
	left := contract.ComputeWhole
	for _, d := range held {
		left -= d.Fraction
	}
	if left <= 0 {
		return 0
	}
	var sizes []item
	for _, pkg := range pkgs {
		if pkg.kind == contract.SharingPartition && slices.Contains(o.Fractions, pkg.fraction) {
			sizes = append(sizes, item{size: pkg.fraction})
		}
	}
	return g.MemoryBytes * uint64(left-mostFilled(left, 0, sizes)) / 100
}

func strandedAnySize(g discovery.GPU, held []checkpoint.Device, pkgs []slicePackage) uint64 {
	capacity := g.MemoryBytes / contract.MemoryStep * contract.MemoryStep // the any-size device's, as published
	var used uint64
	compute := contract.ComputeWhole
	for _, d := range held {
		used += d.MemoryBytes
		compute -= d.Fraction
	}
	if used >= capacity {
		return 0
	}
	free := capacity - used
	var sizes []item
	for _, pkg := range pkgs {
		if pkg.kind == contract.SharingAnySize {
			// a claim's memory is rounded up to the device's step
			sizes = append(sizes, item{size: int((pkg.memory + contract.MemoryStep - 1) / contract.MemoryStep), cost: pkg.compute})
		}
	}
	return free - uint64(mostFilled(int(free/contract.MemoryStep), max(compute, 0), sizes))*contract.MemoryStep
}

func strandedMIG(g discovery.GPU, held []checkpoint.Device, pkgs []slicePackage) uint64 {
	taken := map[string]bool{}
	for _, d := range held {
		if d.MIG != nil {
			taken[d.MIG.UUID] = true
		}
	}
	offered := map[string]bool{}
	for _, pkg := range pkgs {
		if pkg.kind == contract.SharingMIG {
			offered[pkg.migProfile] = true
		}
	}
	var out uint64
	for _, m := range g.MIG {
		if !taken[m.UUID] && !offered[m.Profile] {
			out += m.MemoryBytes
		}
	}
	return out
}

// item is a slice of some size that costs some compute.
type item struct{ size, cost int }

// mostFilled is the largest total size, at most room, that any number of
// items (each as often as wanted) add up to with their costs at most
// budget. least[n] is the least cost of making exactly n, which is what
// decides whether n fits the budget.
func mostFilled(room, budget int, items []item) int {
	const none = int(^uint(0) >> 1)
	least := make([]int, room+1)
	best := 0
	for n := 1; n <= room; n++ {
		least[n] = none
		for _, it := range items {
			if it.size > 0 && it.size <= n && least[n-it.size] != none && least[n-it.size]+it.cost < least[n] {
				least[n] = least[n-it.size] + it.cost
			}
		}
		if least[n] <= budget {
			best = n
		}
	}
	return best
}
