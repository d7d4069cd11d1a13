// Command gpuslice-nodeplugin is gpuslice's DRA kubelet plugin: it runs on
// every GPU node (a DaemonSet, see deploy), publishes the node's
// GPU slices and prepares claims for the kubelet. With --simulate it runs
// on simulated V100s instead of NVML, for local clusters and tests.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
	"github.com/gpuslice/gpuslice/nodeplugin/toolkit"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig, simulate, fractions, metricsAddress, nvmlLibrary string
	cfg                                                          driver.Config
}

func newCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "gpuslice-nodeplugin",
		Short:         "gpuslice's DRA kubelet plugin: publishes a node's GPU slices and prepares claims",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default $NODE_NAME, set from the downward API)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig to reach the API server (default: the pod's service account)")
	f.StringVar(&o.simulate, "simulate", "", "run on simulated GPUs instead of NVML: <profile>:<count>[,mig=<instance>[*<n>],...], groups separated by ';', "+
		"e.g. v100-32gb:4, or a100-40gb:1,mig=1g.5gb*7 for an A100 in MIG mode (profiles: "+strings.Join(simulate.ProfileNames(), ", ")+")")
	f.StringVar(&o.nvmlLibrary, "nvml-library", "libnvidia-ml.so.1", "NVML library to load (a path under a driver container's root, if the driver is not on the host)")
	f.StringVar(&o.fractions, "fractions", "25,50,100", "partitions offered on every GPU, in percent; each must divide 100; empty offers none")
	f.BoolVar(&o.cfg.Publish.AnySize, "any-size", contract.DefaultAnySize, "offer every GPU as one any-size device too: claims ask for any memory and compute share of it (DRA consumable capacity)")
	f.BoolVar(&o.cfg.Publish.TimeSliced, "time-slicing", contract.DefaultTimeSlicing, "offer every GPU as one time-sliced device too: claims share it whole, not isolated (no memory limit, no compute share)")
	f.StringVar(&o.cfg.PluginDataDir, "plugin-dir", "/var/lib/kubelet/plugins/gpuslice.dev", "directory of the DRA socket the kubelet calls")
	f.StringVar(&o.cfg.RegistrarDir, "registrar-dir", "/var/lib/kubelet/plugins_registry", "directory where the kubelet discovers plugins")
	f.StringVar(&o.cfg.CDIDir, "cdi-dir", "/var/run/cdi", "directory the container runtime reads CDI specs from")
	f.StringVar(&o.cfg.StateDir, "state-dir", "/var/lib/gpuslice", "directory for the checkpoint and the ld.so.preload file")
	f.StringVar(&o.cfg.AccountingRoot, "accounting-dir", "/run/gpuslice/claims", "directory holding one accounting directory per prepared claim")
	f.StringVar(&o.cfg.DriverRoot, "driver-root", "/", "host directory holding the NVIDIA driver's libraries and nvidia-smi (/run/nvidia/driver with NVIDIA's driver container)")
	f.StringVar(&o.cfg.DriverRootInPlugin, "driver-root-in-plugin", "", "where the plugin's container mounts --driver-root (default: --driver-root itself)")
	f.StringVar(&o.cfg.ShimSource, "shim-library", "/usr/local/lib/gpuslice/libgpuslice.so", "the libgpuslice.so shipped with this plugin; installed into --shim-dir under a versioned name")
	f.StringVar(&o.cfg.ShimDir, "shim-dir", "/var/lib/gpuslice/shim", "host directory the shim library is installed into")
	f.StringVar(&o.cfg.DevDir, "dev-dir", "/dev", "the host's /dev as the plugin sees it: GPU device nodes are read there")
	f.StringVar(&o.cfg.ToolkitConfig, "toolkit-config", toolkit.DefaultConfig, "the host's NVIDIA Container Toolkit configuration (mounted read-only), checked for images picking GPUs with NVIDIA_VISIBLE_DEVICES; empty skips the check")
	f.StringVar(&o.cfg.BootIDFile, "boot-id-file", checkpoint.DefaultBootIDFile, "file whose content changes on every boot of the node: a new value means a reboot (local clusters simulate one with a file of their own)")
	f.DurationVar(&o.cfg.HealthRecovery, "health-recovery", driver.DefaultHealthRecovery, "how long a GPU found failing (a critical XID, a double-bit ECC error, lost) must stay quiet before its devices are untainted ("+contract.TaintUnhealthy+") and take new slices again")
	f.DurationVar(&o.cfg.HealthEvictAfter, "health-evict-after", 0, "how long a GPU stays unhealthy before its taint ("+contract.TaintUnhealthy+") turns from NoSchedule to NoExecute, so that kube-controller-manager's device taint eviction controller evicts the pods using it; 0 never evicts: running pods finish")
	f.StringVar(&o.metricsAddress, "metrics-address", ":9400", "address serving /metrics and /healthz; empty turns it off")
	// klog's verbosity only: the plugin logs to stderr, where the kubelet
	// and `kubectl logs` collect it.
	gf := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(gf)
	f.AddGoFlag(gf.Lookup("v"))
	f.AddGoFlag(gf.Lookup("vmodule"))
	return cmd
}

func run(ctx context.Context, o options) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	if o.cfg.Publish.Fractions, err = publish.ParseFractions(o.fractions); err != nil {
		return fmt.Errorf("--fractions: %w", err)
	}
	rc, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	// The kubelet plugin helper GETs every claim of a prepare call: client-go's
	// default of 5 requests/s would queue a pod with several claims.
	rc.QPS, rc.Burst = 50, 100
	if o.cfg.Client, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	lib, shutdown, err := openNVML(ctx, &o)
	if err != nil {
		return err
	}
	defer shutdown()
	o.cfg.NVML = lib
	o.cfg.SimulatedGPUs = o.simulate != ""
	o.cfg.Logger = klog.Background()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o.cfg.Registerer = reg

	p, err := driver.Start(ctx, o.cfg)
	if err != nil {
		return err
	}
	defer p.Stop()
	serverErr := make(chan error, 1)
	if o.metricsAddress != "" {
		srv := metricsServer(o.metricsAddress, reg)
		go func() { serverErr <- srv.ListenAndServe() }()
		defer srv.Close()
	}
	select {
	case <-ctx.Done():
		klog.Info("stopping")
		return nil
	case err := <-p.Fatal():
		return err
	case err := <-serverErr:
		return fmt.Errorf("--metrics-address %s: %w", o.metricsAddress, err)
	}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		return rc, nil
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("not running in a pod (%w): pass --kubeconfig", err)
	}
	return rc, nil
}

// openNVML loads the real library, or builds the simulated node.
func openNVML(ctx context.Context, o *options) (nvml.Interface, func(), error) {
	if o.simulate != "" {
		specs, err := simulate.ParseNode(o.simulate)
		if err != nil {
			return nil, nil, err
		}
		lib, err := simulate.NewNode(specs, o.cfg.NodeName)
		if err != nil {
			return nil, nil, err
		}
		// The simulated driver's /proc files, where MIG device nodes'
		// numbers are read.
		o.cfg.DriverProcRoot = filepath.Join(o.cfg.StateDir, "simulated-proc")
		if err := simulate.WriteProcFiles(o.cfg.DriverProcRoot, len(lib.Devices)); err != nil {
			return nil, nil, err
		}
		// The simulated silicon: one state file per GPU, shared by the
		// containers on it, whose processes the simulated NVML lists.
		states := filepath.Join(o.cfg.StateDir, "simulated-gpus")
		if err := simulate.AttachProcesses(lib, states, "/proc"); err != nil {
			return nil, nil, err
		}
		o.cfg.SimulatedGPUState = func(uuid string) string { return simulate.StateFile(states, uuid) }
		// The simulated driver's fault log: XIDs, ECC errors and lost
		// GPUs a test injects on a real node.
		faults := simulate.FaultFile(o.cfg.StateDir)
		if err := simulate.WatchFaults(ctx, lib, faults, func(format string, args ...any) { klog.Errorf(format, args...) }); err != nil {
			return nil, nil, err
		}
		return lib, func() {}, nil
	}
	lib := nvml.New(nvml.WithLibraryPath(o.nvmlLibrary))
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("initialise NVML from %s: %v (is the NVIDIA driver installed on this node? without GPUs, use --simulate v100-32gb:1)", o.nvmlLibrary, ret)
	}
	return lib, func() { lib.Shutdown() }, nil
}

func metricsServer(addr string, reg *prometheus.Registry) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}
