// Package enforce is the node plugin's backstop for what the shim cannot
// stop. The shim runs inside the tenant's processes, so a process that does
// not load it (a static binary, direct driver calls, a chroot without the
// preload) or that corrupts the claim's accounting region gets past it. The
// enforcer does not trust anything in the container: every Period it reads
// NVML's per-process device memory on each GPU, attributes the processes to
// claims by their pods' cgroups (package gpuprocs), writes each claim's
// observed memory into its limits file (where the shim reads it), and, when
// a claim is over its limit on a GPU, stops the process that took it over
// (the one whose memory grew most since the previous sample, as the
// kernel's OOM killer picks one victim) with SIGKILL, repeating until the
// claim is under. Other processes and other claims are not touched.
//
// Only claims the shim limits are held: a partition or an any-size share
// to its memory, a claim of whole GPUs to each GPU's memory. A time-sliced
// claim has no limit, and a MIG instance is held by the hardware.
package enforce

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/gpuslice/gpuslice/nodeplugin/gpuprocs"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// Period is how often the enforcer samples: a claim over its limit is
// stopped within about one period of the sample that shows it.
const Period = 200 * time.Millisecond

// dying is how long a killed process's memory is not counted while NVML
// still lists it: the driver frees a dead process's memory shortly after
// it exits. One still listed after that is counted, and stopped, again.
const dying = 5 * time.Second

// Claim is a prepared claim the enforcer holds to its limits.
type Claim struct {
	UID, Namespace, Name string
	// PodUIDs are the pods the claim is reserved for: their processes are
	// the claim's.
	PodUIDs []string
	// GPUs are the claim's GPUs and the memory it may use on each.
	GPUs []GPU
	// LimitsFile is the claim's limits file, where the observation is
	// written for the shim.
	LimitsFile string
}

// GPU is one of a claim's GPUs.
type GPU struct {
	UUID  string
	Limit uint64 // bytes
}

// Process is a process NVML lists on a GPU.
type Process struct {
	PID  uint32 // in the host's PID namespace
	Used uint64 // device memory NVML shows for it
	Grew uint64 // since the previous sample
	// Command and ContainerPID (its PID in its own PID namespace, which the
	// tenant sees) are read for the processes stopped, before the signal.
	Command      string
	ContainerPID uint32
}

// Kill is one process the enforcer stopped (or tried to: Err).
type Kill struct {
	Claim     Claim
	GPU       string
	PodUID    string
	Process   Process
	ClaimUsed uint64 // the claim's memory on the GPU before the kill
	Limit     uint64
	Sampled   time.Time // when the sample that showed the overshoot began
	At        time.Time // when the signal was sent
	Err       error
}

// Config is what the enforcer watches and how it acts.
type Config struct {
	NVML nvml.Interface
	// GPUs are the UUIDs of the GPUs to watch: those not in MIG mode.
	GPUs []string
	// Claims lists the claims to hold, called at every sample.
	Claims func() []Claim
	// ProcRoot is the host's /proc (the plugin runs in the host's PID
	// namespace): processes' pods and names are read there.
	ProcRoot string
	// PodOf returns the UID of the pod a process runs in ("" for none);
	// default: its cgroup's (gpuprocs.PodUIDOf).
	PodOf func(pid uint32) string
	// Stop stops a process of the pod podUID: default Signal (SIGKILL
	// through a pidfd, after checking the PID is still the pod's).
	Stop func(pid uint32, podUID string) error
	// OnKill is told of each kill, after it happened (events, logs); it
	// must not block.
	OnKill func(Kill)
	// Registerer receives the enforcer's metrics; nil registers none.
	Registerer prometheus.Registerer
	Logger     klog.Logger
}

// Enforcer samples and acts; Run loops, Sample is one pass.
type Enforcer struct {
	cfg       Config
	log       klog.Logger
	prev      map[procKey]uint64    // memory at the previous sample
	killed    map[procKey]time.Time // stopped, memory not yet freed
	observers map[string]*accounting.Observer
	broken    map[string]bool // claims whose limits file could not be opened (logged once)
	blind     map[string]bool // GPUs whose processes could not be listed (logged once)
	kills     *prometheus.CounterVec
	samples   prometheus.Histogram
}

type procKey struct {
	gpu string
	pid uint32
}

// New returns an enforcer; its metrics are registered with cfg.Registerer.
func New(cfg Config) *Enforcer {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.PodOf == nil {
		cfg.PodOf = func(pid uint32) string { return gpuprocs.PodUIDOf(cfg.ProcRoot, pid) }
	}
	if cfg.Stop == nil {
		cfg.Stop = func(pid uint32, pod string) error { return Signal(pid, func() bool { return cfg.PodOf(pid) == pod }) }
	}
	e := &Enforcer{
		cfg: cfg, log: cfg.Logger, prev: map[procKey]uint64{}, killed: map[procKey]time.Time{},
		observers: map[string]*accounting.Observer{}, broken: map[string]bool{}, blind: map[string]bool{},
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpuslice_claim_enforcer_kills_total",
			Help: "Processes the node plugin stopped (SIGKILL) because NVML showed their claim over its memory limit on a GPU.",
		}, []string{"namespace", "claim", "claim_uid", "UUID"}),
		samples: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gpuslice_enforcer_sample_duration_seconds",
			Help:    "Time of one enforcer pass: NVML's processes on every GPU, attributed to claims, observations written.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}),
	}
	if e.log.GetSink() == nil {
		e.log = klog.Background()
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(e.kills, e.samples)
	}
	return e
}

// Run samples every Period until ctx ends, then unmaps the limits files.
func (e *Enforcer) Run(ctx context.Context) {
	t := time.NewTicker(Period)
	defer t.Stop()
	defer e.Close()
	for {
		e.Sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close withdraws the observations from the limits files of the claims
// watched and unmaps them: once the enforcer stops, an observation would
// only hold the claims to memory their processes have freed since.
func (e *Enforcer) Close() {
	for uid, o := range e.observers {
		o.Withdraw()
		o.Close()
		delete(e.observers, uid)
	}
}

// Sample is one pass over every GPU; it returns the kills it made.
func (e *Enforcer) Sample() []Kill {
	start := time.Now()
	defer func() { e.samples.Observe(time.Since(start).Seconds()) }()
	claims := slices.Clone(e.cfg.Claims())
	slices.SortFunc(claims, func(a, b Claim) int { return cmp.Compare(a.UID, b.UID) })
	observed := make([]uint64, len(claims))
	complete := make([]bool, len(claims)) // every GPU of the claim was read
	for i := range claims {
		complete[i] = true
	}
	prev := map[procKey]uint64{}
	var kills []Kill
	for _, uuid := range e.cfg.GPUs {
		kills = append(kills, e.sampleGPU(uuid, claims, observed, complete, prev, start)...)
	}
	e.prev = prev
	for k, at := range e.killed {
		if start.Sub(at) >= dying {
			delete(e.killed, k)
		}
	}
	e.observe(claims, observed, complete, start)
	return kills
}

// sampleGPU holds the claims on one GPU to their limits, adding what each
// uses there to observed (or clearing its complete when the GPU's
// processes cannot be listed) and each process's memory to prev; it
// returns the kills it made.
func (e *Enforcer) sampleGPU(uuid string, claims []Claim, observed []uint64, complete []bool, prev map[procKey]uint64, start time.Time) []Kill {
	pods := make([][]string, len(claims))
	limit := make([]uint64, len(claims))
	for i, c := range claims {
		for _, g := range c.GPUs {
			if g.UUID == uuid {
				pods[i], limit[i] = c.PodUIDs, g.Limit
			}
		}
	}
	procs, err := e.processes(uuid)
	if err != nil {
		for i := range claims {
			if pods[i] != nil {
				complete[i] = false
			}
		}
		if !e.blind[uuid] {
			e.blind[uuid] = true
			e.log.Error(err, "cannot list the processes on a GPU: its claims are not held to their limits until it can", "uuid", uuid)
		}
		return nil
	}
	if e.blind[uuid] {
		delete(e.blind, uuid)
		e.log.Info("the processes on a GPU can be listed again", "uuid", uuid)
	}
	mine, podOf := e.attribute(uuid, procs, pods, prev, start)
	var kills []Kill
	for i, c := range claims {
		if pods[i] == nil {
			continue
		}
		var used uint64
		for _, p := range mine[i] {
			used += p.Used
		}
		if limit[i] > 0 && used > limit[i] {
			for _, k := range e.stop(c, uuid, limit[i], used, mine[i], podOf, start) {
				kills = append(kills, k)
				if k.Err == nil {
					used -= k.Process.Used
				}
			}
		}
		observed[i] += used
	}
	return kills
}

// attribute sorts the processes on GPU uuid by the claim whose pods (pods,
// per claim) run them, recording each one's memory in prev, and says which
// pod runs each; processes stopped a moment ago are left out.
func (e *Enforcer) attribute(uuid string, procs []nvml.ProcessInfo, pods [][]string, prev map[procKey]uint64, start time.Time) ([][]Process, map[uint32]string) {
	owners := gpuprocs.NewOwners(pods)
	mine := make([][]Process, len(pods))
	podOf := map[uint32]string{}
	for _, p := range procs {
		k := procKey{uuid, p.Pid}
		prev[k] = p.UsedGpuMemory
		if at, ok := e.killed[k]; ok && start.Sub(at) < dying {
			continue // stopped; its memory is on its way back
		}
		pod := e.cfg.PodOf(p.Pid)
		i := owners.Of(pod)
		if i < 0 {
			continue
		}
		podOf[p.Pid] = pod
		grew := uint64(0)
		if p.UsedGpuMemory > e.prev[k] {
			grew = p.UsedGpuMemory - e.prev[k]
		}
		mine[i] = append(mine[i], Process{PID: p.Pid, Used: p.UsedGpuMemory, Grew: grew})
	}
	return mine, podOf
}

func (e *Enforcer) processes(uuid string) ([]nvml.ProcessInfo, error) {
	dev, ret := e.cfg.NVML.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("find the GPU: %v", ret)
	}
	procs, ret := dev.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("list its compute processes: %v", ret)
	}
	return procs, nil
}

// stop kills the claim's processes on the GPU, the one that grew most
// first, until what is left is within the limit.
func (e *Enforcer) stop(c Claim, uuid string, limit, used uint64, procs []Process, podOf map[uint32]string, sampled time.Time) []Kill {
	slices.SortFunc(procs, func(a, b Process) int {
		return cmp.Or(cmp.Compare(b.Grew, a.Grew), cmp.Compare(b.Used, a.Used), cmp.Compare(a.PID, b.PID))
	})
	var kills []Kill
	for _, p := range procs {
		if used <= limit {
			break
		}
		p.Command, p.ContainerPID = describe(e.cfg.ProcRoot, p.PID)
		k := Kill{Claim: c, GPU: uuid, PodUID: podOf[p.PID], Process: p, ClaimUsed: used, Limit: limit, Sampled: sampled}
		k.Err = e.cfg.Stop(p.PID, k.PodUID)
		k.At = time.Now()
		if k.Err == nil {
			used -= p.Used
			e.killed[procKey{uuid, p.PID}] = k.At
			e.kills.WithLabelValues(c.Namespace, c.Name, c.UID, uuid).Inc()
			e.log.Info("stopped a process over its claim's GPU memory limit", "claim", c.Namespace+"/"+c.Name, "gpu", uuid,
				"pid", p.PID, "containerPID", p.ContainerPID, "command", p.Command, "pod", k.PodUID, "usedMiB", p.Used>>20, "grewMiB", p.Grew>>20, "claimUsedMiB", k.ClaimUsed>>20, "limitMiB", limit>>20,
				"afterSample", k.At.Sub(sampled))
		}
		kills = append(kills, k)
		if e.cfg.OnKill != nil {
			e.cfg.OnKill(k)
		}
		if k.Err != nil {
			// not the next process for this one's memory: the next sample
			// looks again
			e.log.Error(k.Err, "cannot stop a process over its claim's GPU memory limit", "claim", c.Namespace+"/"+c.Name, "gpu", uuid, "pid", p.PID)
			break
		}
	}
	return kills
}

// observe writes each claim's memory into its limits file, where the shim
// reads it; a claim one of whose GPUs could not be read keeps its previous
// observation.
func (e *Enforcer) observe(claims []Claim, observed []uint64, complete []bool, at time.Time) {
	seen := map[string]bool{}
	for i, c := range claims {
		seen[c.UID] = true
		if c.LimitsFile == "" || !complete[i] {
			continue
		}
		o := e.observers[c.UID]
		if o == nil {
			var err error
			if o, err = accounting.OpenObserver(c.LimitsFile); err != nil {
				if !e.broken[c.UID] {
					e.broken[c.UID] = true
					e.log.Error(err, "cannot write the claim's observed GPU memory for its shim", "claim", c.Namespace+"/"+c.Name)
				}
				continue
			}
			e.observers[c.UID] = o
			delete(e.broken, c.UID)
		}
		o.Observe(observed[i], at)
	}
	for uid, o := range e.observers {
		if !seen[uid] {
			o.Close()
			delete(e.observers, uid)
		}
	}
	for uid := range e.broken {
		if !seen[uid] {
			delete(e.broken, uid)
		}
	}
}
