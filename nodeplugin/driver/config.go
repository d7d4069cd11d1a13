// Package driver is the gpuslice DRA kubelet plugin: it publishes the
// node's GPU slices as ResourceSlices and prepares claims for the kubelet
// (CDI spec, accounting region, checkpoint), through the helper in
// k8s.io/dynamic-resource-allocation/kubeletplugin.
package driver

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpuslice/gpuslice/nodeplugin/publish"
)

// Config is everything the plugin needs; the command fills it from flags.
type Config struct {
	NodeName string
	NodeUID  types.UID // optional: looked up by the ResourceSlice controller when empty
	Client   kubernetes.Interface
	// NVML is an initialised library, real or simulated.
	NVML nvml.Interface
	// Publish says what every GPU offers: partitions, an any-size device,
	// a time-sliced device.
	Publish publish.Options

	// PluginDataDir holds the DRA socket (dra.sock) the kubelet calls;
	// RegistrarDir is where the kubelet looks for plugin registration
	// sockets (/var/lib/kubelet/plugins_registry).
	PluginDataDir string
	RegistrarDir  string
	// CDIDir is where claim specs are written (/var/run/cdi).
	CDIDir string
	// StateDir holds the checkpoint and the ld.so.preload file.
	StateDir string
	// AccountingRoot holds one directory per prepared claim, mounted into
	// the claim's containers.
	AccountingRoot string
	// DriverRoot is the host directory holding the driver's files ("/");
	// DriverRootInPlugin is where the plugin sees it (default DriverRoot).
	DriverRoot         string
	DriverRootInPlugin string
	// ShimSource is the libgpuslice.so shipped with the plugin; it is
	// installed into ShimDir under a name carrying its content hash.
	ShimSource string
	ShimDir    string
	// DevDir is the host's /dev as the plugin sees it: the GPU device
	// nodes' numbers are read there. SimulatedGPUs have no device files;
	// their nodes get the numbers the NVIDIA driver gives them.
	DevDir        string
	SimulatedGPUs bool
	// SimulatedGPUState names a simulated GPU's state file on the host (see
	// simulate.AttachProcesses), which the claims' containers on the GPU
	// share; nil on real GPUs.
	SimulatedGPUState func(uuid string) string
	// ToolkitConfig is the host's NVIDIA Container Toolkit configuration as
	// the plugin sees it, checked for the image-environment bypass; empty
	// skips the check.
	ToolkitConfig string
	// BootIDFile is read to notice reboots (checkpoint.DefaultBootIDFile).
	BootIDFile string
	// ProcRoot is where GPU processes' cgroups are read to attribute them
	// to claims ("/proc"; the plugin's pod runs in the host PID namespace).
	ProcRoot string
	// DriverProcRoot is where the NVIDIA driver's /proc files are read
	// (devices, driver/nvidia-caps/mig-minors: the numbers of MIG device
	// nodes): "/proc", or the files a simulated node's simulation wrote.
	DriverProcRoot string

	// HealthRecovery is how long a GPU found failing must stay quiet
	// before its devices are untainted (DefaultHealthRecovery if 0);
	// HealthPoll how often each GPU is read to see that it answers
	// (DefaultHealthPoll if 0).
	HealthRecovery time.Duration
	HealthPoll     time.Duration
	// HealthEvictAfter is how long a GPU stays unhealthy before its taint
	// turns from NoSchedule to NoExecute, so that the device taint
	// eviction controller evicts the pods using it; 0 never: running pods
	// finish.
	HealthEvictAfter time.Duration

	// Registerer receives the plugin's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	Logger     klog.Logger

	// AfterStep, if set, is called after each step of a prepare or
	// unprepare that changes the node (see the Step constants): the crash
	// tests kill the process there.
	AfterStep func(step Step)
}

// Step names a point in PrepareResourceClaims after which the node's state
// has changed.
type Step string

const (
	StepCheckpointStarted   Step = "checkpoint-started"   // claims recorded as PrepareStarted
	StepAccountingCreated   Step = "accounting-created"   // a claim's accounting dir and region exist
	StepSpecWritten         Step = "spec-written"         // a claim's CDI spec is on disk
	StepCheckpointCompleted Step = "checkpoint-completed" // claims recorded as PrepareCompleted
)

// StepUnprepareRemoved: an unprepare removed a claim's spec and accounting
// dir, its checkpoint entry not yet.
const StepUnprepareRemoved Step = "unprepare-removed"

// Steps lists the steps in the order a prepare passes them.
var Steps = []Step{StepCheckpointStarted, StepAccountingCreated, StepSpecWritten, StepCheckpointCompleted}

func (c *Config) validate() error {
	var errs []error
	need := func(v, flag string) {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", flag))
		}
	}
	need(c.NodeName, "--node-name (or NODE_NAME)")
	need(c.PluginDataDir, "--plugin-dir")
	need(c.RegistrarDir, "--registrar-dir")
	need(c.CDIDir, "--cdi-dir")
	need(c.StateDir, "--state-dir")
	need(c.AccountingRoot, "--accounting-dir")
	need(c.ShimSource, "--shim-library")
	need(c.ShimDir, "--shim-dir")
	if c.Client == nil {
		errs = append(errs, errors.New("a Kubernetes client is required"))
	}
	if c.NVML == nil {
		errs = append(errs, errors.New("an NVML library is required"))
	}
	for _, d := range []string{c.PluginDataDir, c.RegistrarDir, c.CDIDir, c.StateDir, c.AccountingRoot, c.ShimDir} {
		if d != "" && !filepath.IsAbs(d) {
			errs = append(errs, fmt.Errorf("directory %q must be an absolute path", d))
		}
	}
	if c.DriverRoot == "" {
		c.DriverRoot = "/"
	}
	if c.ProcRoot == "" {
		c.ProcRoot = "/proc"
	}
	if c.DriverProcRoot == "" {
		c.DriverProcRoot = "/proc"
	}
	if c.HealthRecovery < 0 {
		errs = append(errs, fmt.Errorf("--health-recovery %v: must be positive (how long a failing GPU stays quiet before it is untainted), e.g. 5m", c.HealthRecovery))
	}
	if c.HealthRecovery == 0 {
		c.HealthRecovery = DefaultHealthRecovery
	}
	if c.HealthEvictAfter < 0 {
		errs = append(errs, fmt.Errorf("--health-evict-after %v: must be 0 (never evict: running pods finish) or positive, e.g. 10m", c.HealthEvictAfter))
	}
	if c.HealthPoll == 0 {
		c.HealthPoll = DefaultHealthPoll
	}
	if c.DriverRootInPlugin == "" {
		c.DriverRootInPlugin = c.DriverRoot
	}
	return errors.Join(errs...)
}
