// Command fluxssa applies a directory of manifests the way Flux's
// kustomize-controller does, with Flux's own server-side-apply engine
// (github.com/fluxcd/pkg/ssa): a staged apply (namespaces, cluster roles
// and CRDs first) in which every object is dry-run applied and compared,
// and only those that differ are applied. With nothing changed it is
// dry-run only: Flux's no-change reconciliation. It is the peer that
// `make bench-peers` measures gpuslice against, on the same objects.
//
//	fluxssa -kubeconfig FILE -f objects.yaml [-workers 16]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	file := flag.String("f", "", "multi-document YAML of the objects to apply")
	workers := flag.Int("workers", 16, "objects dry-run applied and applied at once")
	flag.Parse()
	if err := run(*kubeconfig, *file, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "fluxssa:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, file string, workers int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// No client-side throttling: the measure is the engine, not a limiter.
	cfg.QPS, cfg.Burst = -1, -1
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	objects, err := utils.ReadObjects(f)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	poller := polling.NewStatusPoller(c, c.RESTMapper(), polling.Options{})
	m := ssa.NewResourceManager(c, poller, ssa.Owner{Field: "fluxssa", Group: "fluxssa.bench"})
	m.SetConcurrency(workers)
	opts := ssa.DefaultApplyOptions()
	opts.WaitInterval, opts.WaitTimeout = 100*time.Millisecond, time.Minute
	cs, err := m.ApplyAllStaged(context.Background(), objects, opts)
	if err != nil {
		return err
	}
	counts := map[ssa.Action]int{}
	for _, e := range cs.Entries {
		counts[e.Action]++
	}
	fmt.Printf("%d objects: %d created, %d configured, %d unchanged\n", len(objects),
		counts[ssa.CreatedAction], counts[ssa.ConfiguredAction], counts[ssa.UnchangedAction])
	return nil
}
