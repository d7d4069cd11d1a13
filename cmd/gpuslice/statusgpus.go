package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/gpuslice/gpuslice/engine/maintenance"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
)

// printUnhealthyDevices says which workloads hold a slice the kubelet
// reports unhealthy, and why: the node plugin's message, else the reason
// its GPU is tainted for.
func printUnhealthyDevices(w io.Writer, addrs []string, statuses map[string]status.Status, stack *spec.Stack, gpus []maintenance.GPUState) {
	namespaces := map[string]string{}
	for _, wl := range stack.Workloads {
		namespaces[wl.Address] = wl.Namespace
	}
	header := false
	for _, a := range addrs {
		for _, d := range statuses[a].UnhealthyDevices {
			if !header {
				fmt.Fprintln(w, "\nUnhealthy devices:")
				header = true
			}
			claim := namespaces[a] + "/" + d.Claim
			why := d.Message
			if why == "" {
				why = gpuReason(gpus, claim)
			}
			fmt.Fprintf(w, "  %s: pod %s, container %s: device %s (claim %s) is %s: %s\n", a, d.Pod, d.Container, d.Device, claim, d.Health, why)
		}
	}
}

// gpuReason says why the GPU holding claim is unhealthy, as its taint does.
func gpuReason(gpus []maintenance.GPUState, claim string) string {
	for _, g := range gpus {
		for _, c := range g.Claims {
			if c == claim && g.Unhealthy() {
				return fmt.Sprintf("GPU %d of node %s is unhealthy (%s)", g.Index, g.Node, g.HealthReason)
			}
		}
	}
	return "the kubelet gives no reason; `gpuslice gpu list` shows the GPU's taints"
}

// printGPUs lists the GPUs that hold slices in the stack's namespaces and
// every GPU that is unhealthy or tainted, with their health, taints and
// the slices still on them.
func printGPUs(w io.Writer, stack *spec.Stack, gpus []maintenance.GPUState) error {
	namespaces := map[string]bool{}
	for _, wl := range stack.Workloads {
		namespaces[wl.Namespace] = true
	}
	var shown []maintenance.GPUState
	for _, g := range gpus {
		ours := false
		for _, c := range g.Claims {
			ns, _, _ := strings.Cut(c, "/")
			ours = ours || namespaces[ns]
		}
		if ours || g.Unhealthy() || g.Tainted > 0 {
			shown = append(shown, g)
		}
	}
	if len(shown) == 0 {
		return nil
	}
	sort.SliceStable(shown, func(i, j int) bool { return shown[i].Node < shown[j].Node })
	fmt.Fprintln(w, "\nGPUs holding this stack's slices, and every tainted GPU:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tGPU\tMODEL\tHEALTH\tTAINTS\tSLICES")
	for _, g := range shown {
		taints := make([]string, len(g.Taints))
		for i, t := range g.Taints {
			taints[i] = t.String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", g.Node, g.Index, g.Model, g.Health, dash(strings.Join(taints, "; ")), dash(strings.Join(g.Claims, ", ")))
	}
	return tw.Flush()
}
