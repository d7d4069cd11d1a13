package driver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/health"
	"github.com/gpuslice/gpuslice/nodeplugin/metrics"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
)

// Plugin is a running node plugin.
type Plugin struct {
	ctx     context.Context // the plugin's lifetime, for background work
	cfg     Config
	log     klog.Logger
	helper  *kubeletplugin.Helper
	gpus    []discovery.GPU
	devices map[string]publish.Device
	cdi     *cdispec.Writer
	host    cdispec.Host
	ckpt    *checkpoint.File
	bootID  string
	classes *deviceClasses
	metrics *metrics.Plugin
	// registerer holds the plugin's metrics (a private registry when the
	// configuration gives none)
	registerer   prometheus.Registerer
	stopEnforcer func()
	// watcher says which GPUs are unhealthy; healthChanged wakes those
	// who report it when that changes
	watcher       *health.Watcher
	healthChanged *notifier
	stopHealth    context.CancelFunc

	mu       sync.Mutex
	prepared map[string]checkpoint.Claim // last saved checkpoint's claims, for metrics

	fatal     chan error
	fatalOnce sync.Once
}

// Start discovers the GPUs, installs the shim, recovers the checkpoint,
// starts serving the kubelet and publishes the node's ResourceSlices.
func Start(ctx context.Context, cfg Config) (*Plugin, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("node plugin configuration: %w", err)
	}
	p := &Plugin{ctx: ctx, cfg: cfg, log: cfg.Logger, fatal: make(chan error, 1), prepared: map[string]checkpoint.Claim{}}
	if p.log.GetSink() == nil {
		p.log = klog.Background()
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry() // metrics kept but not exported
	}
	p.registerer = reg
	p.metrics = metrics.NewPlugin(reg)

	skipped, err := p.discoverGPUs()
	if err != nil {
		return nil, err
	}
	reg.MustRegister(metrics.ClaimCollector{Claims: p.claimsForMetrics}, metrics.GPUCollector{NVML: cfg.NVML, GPUs: p.gpus, Hostname: cfg.NodeName},
		metrics.ProcessCollector{NVML: cfg.NVML, GPUs: p.gpus, Hostname: cfg.NodeName, Claims: p.claimsForMetrics, ProcRoot: cfg.ProcRoot})

	if err := p.setUpHost(); err != nil {
		return nil, err
	}
	if err := p.startHealth(ctx); err != nil {
		return nil, fmt.Errorf("watch GPU health: %w", err)
	}
	reg.MustRegister(metrics.HealthCollector{GPUs: p.gpus, Hostname: cfg.NodeName, Reason: p.unhealthyReason})
	p.classes = watchDeviceClasses(ctx, cfg.Client)
	reg.MustRegister(metrics.StrandedCollector{GPUs: p.gpus, Hostname: cfg.NodeName, Stranded: p.strandedMemory})
	p.checkToolkit(ctx)
	if err := p.reconcileWithCheckpoint(ctx); err != nil {
		p.stopHealth()
		return nil, err
	}
	p.startEnforcer(ctx)

	helper, err := p.serveKubelet(ctx)
	if err != nil {
		p.stopEnforcer()
		p.stopHealth()
		return nil, err
	}
	p.helper = helper
	changed := p.healthChanged.changed()
	if err := helper.PublishResources(ctx, p.resources()); err != nil {
		helper.Stop()
		p.stopEnforcer()
		p.stopHealth()
		return nil, fmt.Errorf("publish ResourceSlices: %w", err)
	}
	go p.republishOnChange(ctx, changed)
	p.log.Info("node plugin started", "node", cfg.NodeName, "gpus", len(p.gpus), "skipped", skipped,
		"devices", len(p.devices), "socket", cfg.PluginDataDir, "prepared", len(p.prepared))
	return p, nil
}

// discoverGPUs reads the node's GPUs through NVML and the devices they are
// published as; it returns how many GPUs it skipped.
func (p *Plugin) discoverGPUs() (int, error) {
	found, err := discovery.Discover(p.cfg.NVML)
	if err != nil {
		return 0, err
	}
	for _, s := range found.Skipped {
		p.log.Info("GPU skipped: it is not offered as slices", "index", s.Index, "uuid", s.UUID, "reason", s.Reason)
		p.metrics.GPUsSkipped.WithLabelValues(fmt.Sprint(s.Index), s.UUID, s.Reason).Set(1)
	}
	if err := p.cfg.Publish.Validate(found.GPUs); err != nil {
		return 0, fmt.Errorf("node plugin configuration: %w", err)
	}
	p.gpus = found.GPUs
	for _, g := range p.gpus {
		if g.MIGEnabled {
			p.log.Info("GPU in MIG mode: offered as its MIG instances only", "index", g.Index, "uuid", g.UUID, "instances", len(g.MIG))
		}
	}
	p.metrics.GPUsPublished.Set(float64(len(p.gpus)))
	p.devices = map[string]publish.Device{}
	for _, d := range publish.Devices(p.gpus, p.cfg.Publish) {
		p.devices[d.Name] = d
	}
	return len(found.Skipped), nil
}

// serveKubelet starts the kubelet plugin service (registration and the
// DRA socket) in the plugin's directories.
func (p *Plugin) serveKubelet(ctx context.Context) (*kubeletplugin.Helper, error) {
	for _, dir := range []string{p.cfg.PluginDataDir, p.cfg.RegistrarDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	helper, err := kubeletplugin.Start(klog.NewContext(ctx, p.log), p,
		kubeletplugin.DriverName(contract.DriverName),
		kubeletplugin.KubeClient(p.cfg.Client),
		kubeletplugin.NodeName(p.cfg.NodeName),
		kubeletplugin.NodeUID(p.cfg.NodeUID),
		kubeletplugin.PluginDataDirectoryPath(p.cfg.PluginDataDir),
		kubeletplugin.RegistrarDirectoryPath(p.cfg.RegistrarDir),
		kubeletplugin.GRPCVerbosity(6),
	)
	if err != nil {
		return nil, fmt.Errorf("start the kubelet plugin service: %w", err)
	}
	return helper, nil
}

// setUpHost installs the shim library, the preload file and the CDI writer.
func (p *Plugin) setUpHost() error {
	var err error
	if p.host.ShimLibrary, err = installShim(p.cfg.ShimSource, p.cfg.ShimDir); err != nil {
		return err
	}
	if err := os.MkdirAll(p.cfg.StateDir, 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	if p.host.PreloadFile, err = writePreloadFile(p.cfg.StateDir); err != nil {
		return err
	}
	p.host.Devices = cdispec.Devices{Dir: p.cfg.DevDir, Simulated: p.cfg.SimulatedGPUs, ProcDir: p.cfg.DriverProcRoot}
	if p.host.DriverFiles, err = cdispec.FindDriverFiles(p.cfg.DriverRootInPlugin, p.cfg.DriverRoot, driverVersion(p.gpus)); err != nil {
		return err
	}
	if len(p.host.DriverFiles) == 0 && len(p.gpus) > 0 {
		p.log.Info("no driver libraries found under the driver root: containers must bring their own (set --driver-root)", "driverRoot", p.cfg.DriverRoot)
	}
	if err := os.MkdirAll(p.cfg.AccountingRoot, 0o755); err != nil {
		return fmt.Errorf("create accounting dir: %w", err)
	}
	if p.cdi, err = cdispec.NewWriter(p.cfg.CDIDir); err != nil {
		return err
	}
	if p.ckpt, err = checkpoint.Open(p.cfg.StateDir); err != nil {
		return err
	}
	bootFile := p.cfg.BootIDFile
	if bootFile == "" {
		bootFile = checkpoint.DefaultBootIDFile
	}
	p.bootID, err = checkpoint.ReadBootID(bootFile)
	return err
}

func driverVersion(gpus []discovery.GPU) string {
	if len(gpus) == 0 {
		return ""
	}
	return gpus[0].DriverVersion
}

// Stop stops serving the kubelet, publishing and enforcing; published
// slices stay.
func (p *Plugin) Stop() {
	if p.helper != nil {
		p.helper.Stop()
	}
	if p.stopEnforcer != nil {
		p.stopEnforcer()
	}
	if p.stopHealth != nil {
		p.stopHealth()
	}
}

// Fatal delivers an error the plugin cannot recover from; the command
// exits on it so the DaemonSet restarts the plugin.
func (p *Plugin) Fatal() <-chan error { return p.fatal }

// GPUs returns the GPUs the plugin offers.
func (p *Plugin) GPUs() []discovery.GPU { return p.gpus }

// HandleError logs background errors (ResourceSlice publishing, gRPC); a
// fatal one ends the plugin.
func (p *Plugin) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		p.fatalOnce.Do(func() { p.fatal <- fmt.Errorf("%s: %w", msg, err) })
	}
}

// WatchHealthStatus reports each device healthy unless the health watcher
// finds its GPU failing, at once when that changes and otherwise within
// the kubelet's 30 s window.
func (p *Plugin) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	ticker := time.NewTicker(15 * time.Second)
	defer ticker.Stop()
	for {
		changed := p.healthChanged.changed()
		select {
		case <-ctx.Done():
			return nil
		case reports <- p.health():
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-changed:
		}
	}
}

func (p *Plugin) health() kubeletplugin.DeviceHealthReport {
	now := time.Now()
	faults := p.watcher.Unhealthy()
	var r kubeletplugin.DeviceHealthReport
	for _, d := range publish.Devices(p.gpus, p.cfg.Publish) {
		h := kubeletplugin.DeviceHealth{PoolName: p.cfg.NodeName, DeviceName: d.Name, Health: kubeletplugin.HealthStatusHealthy, LastUpdated: now}
		if f, bad := faults[d.GPU.UUID]; bad {
			h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("GPU %d (%s): %s", d.GPU.Index, f.Reason, f.Message)
		}
		r.Devices = append(r.Devices, h)
	}
	return r
}

// notifyAfterStep calls Config.AfterStep, if set, once a step has changed
// the node (the crash tests kill the process there).
func (p *Plugin) notifyAfterStep(s Step) {
	if p.cfg.AfterStep != nil {
		p.cfg.AfterStep(s)
	}
}

func (p *Plugin) claimsForMetrics() []metrics.Claim {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []metrics.Claim
	for _, uid := range slices.Sorted(maps.Keys(p.prepared)) { // the first of a pod's claims is always the same one
		c := p.prepared[uid]
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		m := metrics.Claim{UID: uid, Namespace: c.Namespace, Name: c.Name, AccountingDir: p.accountingDir(uid), PodUIDs: c.PodUIDs}
		for _, d := range c.Devices {
			m.Unlimited = m.Unlimited || d.Sharing == contract.SharingTimeSliced
			g := metrics.ClaimGPU{UUID: d.GPUUUID, MemoryLimit: d.MemoryBytes}
			if d.MIG != nil {
				g.MIG = &metrics.ClaimMIG{UUID: d.MIG.UUID, Profile: d.MIG.Profile, GPUInstance: d.MIG.GPUInstance, ComputeInstance: d.MIG.ComputeInstance}
			}
			m.GPUs = append(m.GPUs, g)
		}
		out = append(out, m)
	}
	return out
}

// updateClaimMetrics publishes a saved checkpoint's claims to the metrics.
func (p *Plugin) updateClaimMetrics(cp *checkpoint.Checkpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prepared = map[string]checkpoint.Claim{}
	n := 0
	for uid, c := range cp.Claims {
		p.prepared[uid] = c
		if c.State == checkpoint.PrepareCompleted {
			n++
		}
	}
	p.metrics.PreparedClaims.Set(float64(n))
}
