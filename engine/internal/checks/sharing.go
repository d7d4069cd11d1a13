package checks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// sharing: an any-size or time-sliced package needs nodes that publish its
// kind of device, and an API server that keeps shared devices shared; a
// MIG package needs nodes with MIG instances of its profile. Without them
// its pods would wait in Pending with no reason a tenant can act on, so a
// workload on it fails at plan, and the package itself is warned about
// (the platform team may be about to turn the nodes on).
func (c *checker) sharing() {
	for _, p := range c.stack.Packages {
		if p.Kind() == contract.SharingPartition {
			continue
		}
		if why := c.kindMissing(p); why != "" {
			c.add(diag.Diagnostic{Severity: diag.Warning, Address: p.Address, Attribute: sharingAttr(p), Summary: kindName(p) + " slices not offered", Detail: why})
		}
		c.timeSlicedBeside(p)
	}
	for _, w := range c.stack.Workloads {
		p := c.packageOf(w.Package)
		if p == nil || p.Kind() == contract.SharingPartition {
			continue
		}
		if why := c.kindMissing(p); why != "" {
			c.errorf(w, "package", kindName(p)+" slices not offered", "%s's pods would wait in Pending for good: %s", w.Address, why)
		}
	}
}

func sharingAttr(p *spec.Package) string {
	switch p.Kind() {
	case contract.SharingTimeSliced:
		return "sharing"
	case contract.SharingMIG:
		return "mig_profile"
	}
	return "memory"
}

func kindName(p *spec.Package) string {
	switch p.Kind() {
	case contract.SharingTimeSliced:
		return "Time-sliced"
	case contract.SharingMIG:
		return "MIG"
	}
	return "Any-size"
}

// kindMissing says why the cluster cannot give the package's slices, ""
// when it can or cannot tell.
func (c *checker) kindMissing(p *spec.Package) string {
	if p.Kind() == contract.SharingMIG {
		return c.migMissing(p)
	}
	return c.sharingMissing(p)
}

// sharingMissing says why the cluster cannot give the package's slices,
// "" when it can or cannot tell.
func (c *checker) sharingMissing(p *spec.Package) string {
	f := c.facts
	kind := p.Kind()
	switch {
	case f.ConsumableCapacity != nil && !*f.ConsumableCapacity:
		return fmt.Sprintf("the API server has the DRAConsumableCapacity feature off, which %s slices need (one GPU device shared by many claims); "+
			"turn it on in kube-apiserver, kube-scheduler and the kubelets (--feature-gates=DRAConsumableCapacity=true; on by default since Kubernetes 1.36), or use a fraction package", strings.ToLower(kindName(p)))
	case f.MultiAllocDropped[p.GPUModel]:
		return fmt.Sprintf("the node plugins' %s devices of %s GPUs were published without allowMultipleAllocations: the API server dropped it (DRAConsumableCapacity off), "+
			"so each would be given whole to one claim; turn the feature on in kube-apiserver, kube-scheduler and the kubelets, or use a fraction package", kind, p.GPUModel)
	}
	published := f.Published[p.GPUModel]
	if len(published) == 0 || published[kind] > 0 {
		return "" // no such GPU yet (the capacity checks say so), or offered
	}
	var offered []string
	for k := range published {
		offered = append(offered, k)
	}
	sort.Strings(offered)
	flag, attr := "--any-size", "any_size"
	if kind == contract.SharingTimeSliced {
		flag, attr = "--time-slicing", "time_slicing"
	}
	return fmt.Sprintf("the nodes with %s GPUs publish %s devices only, no %s device; set %s = true on the gpuslice_platform (the node plugin's %s), "+
		"or run a node pool whose node plugin has it on", p.GPUModel, strings.Join(offered, " and "), kind, attr, flag)
}

// timeSlicedBeside warns when a time-sliced package and an isolated one
// target the same GPU model: one GPU serves one kind at a time, so the
// isolated slices are not shared with time-sliced pods, but the two
// compete for the same GPUs, and a tenant given both may not see which
// one holds its limits.
func (c *checker) timeSlicedBeside(p *spec.Package) {
	if p.Kind() != contract.SharingTimeSliced {
		return
	}
	isolated := map[string]bool{}
	for _, o := range c.stack.Packages {
		if o.GPUModel == p.GPUModel && o.Isolated() {
			isolated[o.Name] = true
		}
	}
	for _, o := range c.facts.Packages {
		if o.GPUModel == p.GPUModel && o.Isolated() {
			isolated[o.Name] = true
		}
	}
	if len(isolated) == 0 {
		return
	}
	names := make([]string, 0, len(isolated))
	for n := range isolated {
		names = append(names, n)
	}
	sort.Strings(names)
	c.add(diag.Diagnostic{Severity: diag.Warning, Address: p.Address, Attribute: "sharing", Summary: "Time-sliced and isolated slices of one GPU model",
		Detail: fmt.Sprintf("%s is time-sliced (not isolated) and %s slice %s GPUs too. A GPU serves one kind at a time, so isolated slices never share a GPU with time-sliced pods, "+
			"but both draw on the same GPUs: time-sliced pods can keep isolated workloads waiting. Give time-slicing its own GPU model or node pool if isolated workloads must not wait for it",
			p.Name, strings.Join(names, ", "), p.GPUModel)})
}
