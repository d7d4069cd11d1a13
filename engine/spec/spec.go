// Package spec is the typed form of a gpuslice configuration: what the HCL
// front end and the Terraform provider both produce, and what validation,
// rendering and the plan-time checks read. Field tags follow the attribute
// names of package schema.
package spec

import "github.com/gpuslice/gpuslice/contract"

// Stack is one configuration applied as a unit: its objects share an
// inventory, so removing a resource from it prunes that resource's objects.
type Stack struct {
	Name      string
	Platform  *Platform
	Packages  []*Package
	Quotas    []*Quota
	Workloads []*Workload
}

// Meta locates a resource in the configuration, for diagnostics.
type Meta struct {
	// Address is the resource's configuration address, e.g.
	// gpuslice_workload.ollama.
	Address string `json:"-"`
}

// Platform is gpuslice_platform.
type Platform struct {
	Meta
	Namespace   string `json:"namespace"`
	TenantLabel string `json:"tenant_label"`
	Fractions   []int  `json:"fractions"`
	// AnySize and TimeSlicing say whether the node plugins offer every GPU
	// as an any-size and a time-sliced device; nil leaves it to the plugin's
	// default.
	AnySize           *bool `json:"any_size"`
	TimeSlicing       *bool `json:"time_slicing"`
	AdmissionPolicies bool  `json:"admission_policies"`
	// SchedulerUsers are the users kube-scheduler authenticates as: the
	// only requesters whose claims for extended resources the admission
	// policies treat as the scheduler's.
	SchedulerUsers []string `json:"scheduler_users"`
	ForceDestroy   bool     `json:"force_destroy"`
	// NodePlugin, when set, installs the node plugin's DaemonSet.
	NodePlugin *NodePlugin `json:"node_plugin"`
	// Reconcile, when set, runs gpuslice reconcile as a Deployment.
	Reconcile *Reconcile `json:"reconcile"`
	// Runner, when set, binds a GitOps runner's ServiceAccount to the
	// runner roles.
	Runner *Runner `json:"runner"`
}

// Runner is the platform's runner block.
type Runner struct {
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"service_account"`
}

// Reconcile is the platform's reconcile block.
type Reconcile struct {
	GitURL   string `json:"git_url"`
	Ref      string `json:"ref"`
	Path     string `json:"path"`
	Stack    string `json:"stack"`
	Interval string `json:"interval"`
	Image    string `json:"image"`
}

// NodePlugin is the platform's node_plugin block.
type NodePlugin struct {
	Image           string            `json:"image"`
	ImagePullPolicy string            `json:"image_pull_policy"`
	NodeSelector    map[string]string `json:"node_selector"`
	DriverRoot      string            `json:"driver_root"`
	ToolkitConfig   string            `json:"toolkit_config"`
	SimulatedGPUs   string            `json:"simulated_gpus"`
	Env             map[string]string `json:"env"`
	Tolerations     []Toleration      `json:"toleration"`
	// HealthRecovery and HealthEvictAfter are Go durations, the plugin's
	// --health-recovery and --health-evict-after; empty leaves the
	// plugin's default.
	HealthRecovery   string `json:"health_recovery"`
	HealthEvictAfter string `json:"health_evict_after"`
}

// Toleration is one of the node plugin's tolerations.
type Toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    string `json:"value"`
	Effect   string `json:"effect"`
}

// Package is gpuslice_package: a fraction, any size (memory and compute
// share), time-sliced or a MIG instance (Kind tells which).
type Package struct {
	Meta
	Name     string `json:"name"`
	GPUModel string `json:"gpu_model"`
	// Fraction is a partition's percent of the GPU; 0 for the other kinds.
	Fraction int `json:"fraction"`
	// Memory and ComputeShare are one slice's size: set for an any-size
	// package, inferred by Resolve where left out.
	Memory       string `json:"memory"`
	ComputeShare int    `json:"compute_share"`
	// Sharing is empty (isolated) or SharingTimeSliced; Replicas are a
	// time-sliced package's slices per GPU.
	Sharing  string `json:"sharing"`
	Replicas int    `json:"replicas"`
	// MIGProfile is a MIG package's profile, NVIDIA's name (e.g. "1g.5gb");
	// empty for the other kinds.
	MIGProfile           string `json:"mig_profile"`
	ExtendedResourceName string `json:"extended_resource_name"`
	// Computed by Resolve from the GPU model table.
	MemoryBytes int64 `json:"memory_bytes"`
}

// SharingTimeSliced is the time-sliced package's sharing.
const SharingTimeSliced = contract.SharingTimeSliced

// Kind is how the package's slices share a GPU: contract.SharingPartition
// (a fraction), contract.SharingAnySize, contract.SharingTimeSliced or
// contract.SharingMIG.
func (p *Package) Kind() string {
	switch {
	case p.MIGProfile != "":
		return contract.SharingMIG
	case p.Sharing == SharingTimeSliced:
		return contract.SharingTimeSliced
	case p.Fraction > 0:
		return contract.SharingPartition
	}
	return contract.SharingAnySize
}

// Isolated reports whether a slice of the package is held to its memory
// and compute share.
func (p *Package) Isolated() bool { return p.Kind() != contract.SharingTimeSliced }

// Isolation is what holds a slice of the package to its share: one of the
// contract.Isolation* values.
func (p *Package) Isolation() string {
	switch p.Kind() {
	case contract.SharingMIG:
		return contract.IsolationHardware
	case contract.SharingTimeSliced:
		return contract.IsolationNone
	}
	return contract.IsolationSoftware
}

// Shares is what one slice of a time-sliced package asks of its GPU's
// time-sliced device.
func (p *Package) Shares() int64 {
	if p.Replicas <= 0 {
		return 0
	}
	return contract.SharesOf(p.Replicas)
}

// Quota is gpuslice_quota.
type Quota struct {
	Meta
	Namespace      string           `json:"namespace"`
	Slices         map[string]int64 `json:"slices"`
	CPURequests    string           `json:"cpu_requests"`
	MemoryRequests string           `json:"memory_requests"`
	CPULimits      string           `json:"cpu_limits"`
	MemoryLimits   string           `json:"memory_limits"`
	MaxClaims      *int64           `json:"max_claims"`
	TenantUsers    []string         `json:"tenant_users"`
	TenantGroups   []string         `json:"tenant_groups"`
}

// Workload is gpuslice_workload.
type Workload struct {
	Meta
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Package    string `json:"package"`
	Kind       string `json:"kind"`
	Replicas   int32  `json:"replicas"`
	GPUsPerPod int32  `json:"gpus_per_pod"`
	Workers    int32  `json:"workers"`
	// TrainingOperator is empty for the indexed Job, or
	// TrainingOperatorPyTorchJob or TrainingOperatorTrainJob.
	TrainingOperator string            `json:"training_operator"`
	Labels           map[string]string `json:"labels"`
	Container        Container         `json:"container"`
	ModelVolume      *ModelVolume      `json:"model_volume"`
	Model            *Model            `json:"model"`
	Expose           *Expose           `json:"expose"`
	Autoscaling      *Autoscaling      `json:"autoscaling"`
	PreloadModels    []string          `json:"preload_models"`
	PreloadImage     string            `json:"preload_image"`
	WaitFor          string            `json:"wait_for"`
	Timeout          string            `json:"timeout"`
}

// Workload kinds.
const (
	KindDeployment  = "deployment"
	KindStatefulSet = "statefulset"
	KindJob         = "job"
)

// What apply waits for.
const (
	WaitReady     = "ready"
	WaitScheduled = "scheduled"
	WaitNone      = "none"
)

// Container is the workload's container block.
type Container struct {
	Image string `json:"image"`
	// ImagePullPolicy is empty for Kubernetes' default.
	ImagePullPolicy string            `json:"image_pull_policy"`
	Command         []string          `json:"command"`
	Args            []string          `json:"args"`
	Env             map[string]string `json:"env"`
	CPURequest      string            `json:"cpu_request"`
	MemoryRequest   string            `json:"memory_request"`
	CPULimit        string            `json:"cpu_limit"`
	MemoryLimit     string            `json:"memory_limit"`
	Ports           []Port            `json:"port"`
	ReadinessProbe  *Probe            `json:"readiness_probe"`
	LivenessProbe   *Probe            `json:"liveness_probe"`
}

// Port is one container port.
type Port struct {
	ContainerPort int32  `json:"container_port"`
	Name          string `json:"name"`
	Protocol      string `json:"protocol"`
}

// Probe is a readiness or liveness probe.
type Probe struct {
	HTTPPath            string   `json:"http_path"`
	Port                int32    `json:"port"`
	Command             []string `json:"command"`
	InitialDelaySeconds int32    `json:"initial_delay_seconds"`
	PeriodSeconds       int32    `json:"period_seconds"`
	TimeoutSeconds      int32    `json:"timeout_seconds"`
	FailureThreshold    int32    `json:"failure_threshold"`
}

// ModelVolume is the persistent volume for models.
type ModelVolume struct {
	Size         string `json:"size"`
	MountPath    string `json:"mount_path"`
	StorageClass string `json:"storage_class"`
	AccessMode   string `json:"access_mode"`
	// DeleteOnDestroy deletes the volume with the workload; by default it
	// is kept for the workload's next creation.
	DeleteOnDestroy bool `json:"delete_on_destroy"`
}

// Model is the language model a workload serves, for the fit check.
type Model struct {
	Name          string `json:"name"`
	ContextLength int64  `json:"context_length"`
	KVCacheType   string `json:"kv_cache_type"`
}

// Expose is the workload's Service.
type Expose struct {
	Port       int32  `json:"port"`
	TargetPort int32  `json:"target_port"`
	Type       string `json:"type"`
}

// HasSharedPackages reports whether the stack has an any-size or
// time-sliced package (whose devices several claims share: the API server
// must keep them shared).
func (s *Stack) HasSharedPackages() bool {
	for _, p := range s.Packages {
		if p.Shared() {
			return true
		}
	}
	return false
}

// HasPublishedKindPackages reports whether the stack has a package of a
// kind nodes publish only when set up for it (any-size, time-sliced, MIG),
// which the plan-time checks hold against what the nodes publish.
func (s *Stack) HasPublishedKindPackages() bool {
	for _, p := range s.Packages {
		if p.Kind() != contract.SharingPartition {
			return true
		}
	}
	return false
}

// Shared reports whether the package's slices are shares of one device
// allocated to several claims (any-size, time-sliced).
func (p *Package) Shared() bool {
	k := p.Kind()
	return k == contract.SharingAnySize || k == contract.SharingTimeSliced
}
