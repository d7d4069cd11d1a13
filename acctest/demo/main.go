// Command demo narrates, on the running dev cluster (`gpuslice dev up`),
// the Kubernetes DRA path gpuslice builds on. `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuslice/gpuslice/acctest/cluster"
	"github.com/gpuslice/gpuslice/acctest/devcluster"
	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
)

func main() {
	dir := flag.String("dir", devcluster.DefaultDir(), "directory of the running dev cluster")
	flag.Parse()
	if err := run(context.Background(), *dir); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	state, err := devcluster.Running(dir)
	if err != nil {
		return err
	}
	if len(state.Nodes) == 0 {
		return fmt.Errorf("the dev cluster in %s has no nodes: restart it with `gpuslice dev up --nodes 2`", dir)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", state.Kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	node := state.Nodes[0]

	fmt.Printf("\ngpuslice demo: the Kubernetes DRA path gpuslice builds on, on a real control plane\n\n")
	fmt.Printf("  etcd, kube-apiserver, kube-scheduler and kube-controller-manager v1.37.2, built from Go modules,\n")
	fmt.Printf("  ready in %.1f s at %s; simulated nodes %s.\n", float64(state.StartupMS)/1000, state.Host, strings.Join(state.Nodes, ", "))
	fmt.Printf("  Simulated nodes have no kubelet: the scheduler places pods on them, no container runs.\n\n")

	for _, ns := range []struct {
		name   string
		labels map[string]string
	}{{"team-a", map[string]string{contract.LabelTenant: "true"}}, {"ops", nil}} {
		if _, err := cluster.CreateNamespace(ctx, client, ns.name, ns.labels); err != nil {
			return err
		}
	}
	p := &draproof.Proof{Client: client, Namespace: "team-a", Node: node}
	quarter, half, whole := draproof.ClassName(25), draproof.ClassName(50), draproof.ClassName(100)

	step(1, "Each GPU package is a DeviceClass whose CEL selector pins driver, model and fraction")
	classes, err := p.CreateDeviceClasses(ctx, 25, 50, 100)
	if err != nil {
		return err
	}
	for _, c := range classes {
		fmt.Printf("     DeviceClass %-18s %s\n", c.Name, c.Spec.Selectors[0].CEL.Expression)
	}

	step(2, "A namespace's quota counts claims per device class (plus pooled CPU and memory)")
	q, err := p.CreateQuota(ctx, map[string]int64{quarter: 2, half: 1, whole: 1})
	if err != nil {
		return err
	}
	for _, class := range []string{quarter, half, whole} {
		key := render.DeviceQuotaResource(class)
		used, hard := q.Status.Used[key], q.Status.Hard[key]
		fmt.Printf("     team-a %-55s used %s of %s\n", key, used.String(), hard.String())
	}

	step(3, "An admission policy refuses raw nvidia.com/gpu requests in tenant namespaces")
	if err := p.InstallRawGPUPolicy(ctx); err != nil {
		return err
	}
	refusal := p.TryRawGPUPod(ctx, "team-a", true)
	if refusal == nil {
		return fmt.Errorf("a raw nvidia.com/gpu pod was admitted in tenant namespace team-a")
	}
	fmt.Printf("     team-a (tenant): refused: %v\n", refusal)
	if err := p.TryRawGPUPod(ctx, "ops", false); err != nil {
		return fmt.Errorf("a raw nvidia.com/gpu pod was refused outside tenant namespaces: %w", err)
	}
	fmt.Printf("     ops (not a tenant): admitted (the policy binds to labelled namespaces only)\n")

	step(4, fmt.Sprintf("A %s on %s is published as partitionable slices", draproof.GPUModel, node))
	slices, err := p.PublishGPU(ctx, 25, 50, 100)
	if err != nil {
		return err
	}
	for _, cs := range slices[0].Spec.SharedCounters {
		memory, compute := cs.Counters[contract.CapacityMemory].Value, cs.Counters[contract.CapacityCompute].Value
		fmt.Printf("     ResourceSlice %s: counter set %s = memory %s, compute %s\n", slices[0].Name, cs.Name, memory.String(), compute.String())
	}
	var names []string
	for _, d := range slices[1].Spec.Devices {
		names = append(names, d.Name)
	}
	fmt.Printf("     ResourceSlice %s: %d devices consuming those counters: %s\n", slices[1].Name, len(names), strings.Join(names, " "))

	step(5, "The real scheduler allocates a 50 % slice to a pod's claim and binds the pod")
	first, err := p.RunPod(ctx, "first", half)
	if err != nil {
		return err
	}
	pl, err := p.WaitPlacement(ctx, "first", first, true, time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("     pod team-a/first: claim %s got device %s on node %s\n", first, pl.Device, pl.Node)

	step(6, "A whole-GPU claim does not fit beside it: the counters would exceed the GPU, so it waits")
	second, err := p.RunPod(ctx, "second", whole)
	if err != nil {
		return err
	}
	pl, err = p.WaitPlacement(ctx, "second", second, false, time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("     pod team-a/second: Pending, claim %s unallocated\n     scheduler: %s\n", second, pl.Reason)

	step(7, "Quota is an entitlement, not a reservation: when team-a/first is deleted, second gets the GPU")
	if err := p.DeletePod(ctx, "first"); err != nil {
		return err
	}
	pl, err = p.WaitPlacement(ctx, "second", second, true, 2*time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("     pod team-a/second: claim %s got device %s on node %s\n", second, pl.Device, pl.Node)

	fmt.Printf("\nThe cluster keeps running so you can look around:\n")
	fmt.Printf("  export KUBECONFIG=%s\n", state.Kubeconfig)
	fmt.Printf("  kubectl get deviceclasses,resourceslices; kubectl -n team-a get resourceclaims,pods,resourcequota\n")
	fmt.Printf("Stop it with: make demo-down\n\n")
	return nil
}

func step(n int, title string) { fmt.Printf("%d. %s\n", n, title) }
