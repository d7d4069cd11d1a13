package schema

import (
	"fmt"

	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Platform is the gpuslice_platform resource.
var Platform = Resource{
	Type:        "gpuslice_platform",
	Description: "Cluster-wide gpuslice settings: which namespaces are tenants, which GPU fractions the node plugins offer, and whether the admission policies that keep tenants inside their slices are installed. At most one per cluster.",
	ImportID:    "<namespace>, the platform namespace (default gpuslice-system)",
	Identity:    []string{"namespace"},
	Block: Block{Attributes: []Attribute{
		computed(str("id", "The platform namespace.")),
		forceNew(strDefault("namespace", "gpuslice-system", "Namespace holding the platform's own objects (its settings and, once installed, the node plugin). Created when missing.")),
		strDefault("tenant_label", "gpuslice.dev/tenant", "Label key marking tenant namespaces. Every gpuslice_quota labels its namespace `<tenant_label>=true`; admission policies apply to those namespaces only."),
		{Name: "fractions", Type: cty.List(cty.Number), Default: cty.ListVal([]cty.Value{cty.NumberIntVal(25), cty.NumberIntVal(50), cty.NumberIntVal(100)}),
			Description: "GPU fractions, in percent, that the node plugins pre-cut every GPU into. A package's fraction must be one of them; each must divide 100. An empty list pre-cuts none: only any-size, time-sliced or MIG packages then, and a plugin on a GPU not in MIG mode needs any_size or time_slicing."},
		{Name: "any_size", Type: cty.Bool, Description: "Whether the node plugins offer every GPU as one any-size device too, which any-size packages cut slices of (DRA consumable capacity). Left out: the node plugin's default (" + onOff(contract.DefaultAnySize) + "). " +
			"A GPU serves one kind at a time: while a slice of one kind (fraction, any-size, time-sliced) is allocated on it, slices of the other kinds go to other GPUs."},
		{Name: "time_slicing", Type: cty.Bool, Description: "Whether the node plugins offer every GPU as one time-sliced device too, which time-sliced packages share. Left out: the node plugin's default (" + onOff(contract.DefaultTimeSlicing) + ")."},
		{Name: "admission_policies", Type: cty.Bool, Default: cty.True,
			Description: "Install the ValidatingAdmissionPolicies that admit only the documented claim shape in tenant namespaces."},
		{Name: "scheduler_users", Type: cty.List(cty.String), Default: stringList(spec.DefaultSchedulerUsers),
			Description: "The users kube-scheduler authenticates as (`request.userInfo.username`). A pod asking for a whole-GPU, fraction or MIG package by its extended resource name gets a ResourceClaim the scheduler makes for it, which the admission policies admit only from these users, never because of the claim's own fields. " +
				"Default: `system:kube-scheduler`, as kubeadm and most distributions name it; list the name your cluster's scheduler uses (`kubectl auth whoami` with its credentials) if it differs; a scheduler running as a service account is `system:serviceaccount:<namespace>:<name>`."},
		{Name: "force_destroy", Type: cty.Bool, Default: cty.False,
			Description: "Remove the node plugin (destroy, or a removed `node_plugin` block) even while pods hold slices. Their claims can then not be unprepared until a node plugin runs again: by default the plan refuses and names them."},
	},
		Blocks: []Block{{
			Name: "node_plugin", Nesting: NestingSingle,
			Description: "Install gpuslice's node plugin on the GPU nodes: a DaemonSet (from the chart in `deploy/`) with its ServiceAccount, least-privilege RBAC and the admission policy letting each plugin write only its own node's ResourceSlices. The platform's `fractions` are the slices it offers. Without this block gpuslice does not touch the node side (install the chart yourself).",
			Attributes: []Attribute{
				required(str("image", "The node plugin's image, pinned by tag and digest, e.g. `registry.example.com/gpuslice/gpuslice-nodeplugin:0.1.0@sha256:…` (`make image-push` prints it).")),
				oneOf(strDefault("image_pull_policy", "IfNotPresent", "`Always`, `IfNotPresent` or `Never`."), "Always", "IfNotPresent", "Never"),
				{Name: "node_selector", Type: cty.Map(cty.String), Default: cty.MapVal(map[string]cty.Value{"nvidia.com/gpu.present": cty.StringVal("true")}),
					Description: "Nodes to run on: the GPU nodes. Default: the label NVIDIA's GPU feature discovery sets, `nvidia.com/gpu.present = \"true\"`."},
				strDefault("driver_root", "/", "Where the NVIDIA driver's libraries and `nvidia-smi` are on the nodes: `/` for a driver installed on the host, `/run/nvidia/driver` with NVIDIA's driver container."),
				strDefault("toolkit_config", "/etc/nvidia-container-runtime/config.toml", "The nodes' NVIDIA Container Toolkit configuration, checked for images picking GPUs with NVIDIA_VISIBLE_DEVICES around the slices (an Event on the Node when open); empty skips the check."),
				str("simulated_gpus", "Simulated GPUs instead of NVML, e.g. `v100-32gb:1`: for clusters without GPUs (the local cluster, tests). Leave unset on GPU nodes."),
				{Name: "env", Type: cty.Map(cty.String), Description: "Extra environment of the plugin's container, e.g. where to reach the API server when the cluster's Service address is not routable from the nodes."},
				str("health_recovery", "How long a GPU the plugin found failing (a critical XID, a double-bit ECC error, lost) must stay quiet before its devices' `gpuslice.dev/unhealthy` taint goes and it takes new slices again (Go duration, e.g. `5m`; positive). Default: the plugin's, `5m`. `gpuslice gpu clear` clears a taint at once."),
				str("health_evict_after", "How long after a GPU turned unhealthy its taint turns from NoSchedule to NoExecute, so that kube-controller-manager's device taint eviction controller evicts the pods using it (Go duration, e.g. `10m`). Left out or `0`: never; running pods finish, and only new slices are kept off the GPU."),
			},
			Blocks: []Block{{
				Name: "toleration", Nesting: NestingList,
				Description: "Taints the plugin tolerates, as in a pod spec. Default: `nvidia.com/gpu` (Exists, NoSchedule), the taint GPU nodes commonly carry.",
				Attributes: []Attribute{
					str("key", "Taint key; empty with operator Exists tolerates every taint."),
					oneOf(strDefault("operator", "Equal", "`Equal` or `Exists`."), "Equal", "Exists"),
					str("value", "Taint value, for operator Equal."),
					oneOf(str("effect", "`NoSchedule`, `PreferNoSchedule` or `NoExecute`; empty matches all."), "NoSchedule", "PreferNoSchedule", "NoExecute"),
				},
			}},
		}, {
			Name: "reconcile", Nesting: NestingSingle,
			Description: "Run `gpuslice reconcile` in the cluster: a Deployment (from the chart in `deploy/`) that clones `git_url` itself and applies the stack in `path` of `ref` every `interval`, reverting out-of-band edits, " +
				"and reports each round in the ConfigMap `gpuslice-reconcile-<stack>` of `gpuslice-system`, Events on it and `gpuslice_reconcile_*` metrics (see the guide Reconciling from Git). " +
				"It runs as uid 65532 with a read-only root; its ServiceAccount is bound to the ClusterRole `" + contract.RunnerRole + "` (what an apply writes, the runner block's role, rendered by this block too) and to a Role for its status.",
			Attributes: []Attribute{
				required(str("git_url", "The Git repository, `https://` or `http://`, without credentials (private repositories are not supported yet).")),
				strDefault("ref", "main", "The branch (followed), tag or commit to apply."),
				strDefault("path", ".", "The configuration's directory inside the repository."),
				required(str("stack", "The stack's name: its inventory, lock and status ConfigMap are named after it.")),
				strDefault("interval", "30s", "Time between rounds (Go duration, at least 1s)."),
				required(str("image", "The reconciler's image, pinned by tag and digest, e.g. `registry.example.com/gpuslice/gpuslice-reconcile:0.1.0@sha256:…` (`make image-push-reconcile` prints it).")),
			},
		}, runnerBlock},
	},
}

// runnerBlock binds a GitOps runner's ServiceAccount to the least-privilege
// role (render.RunnerRules).
var runnerBlock = Block{
	Name: "runner", Nesting: NestingSingle,
	Description: "Let a GitOps runner apply gpuslice stacks: binds its ServiceAccount to the ClusterRole `" + contract.RunnerRole + "` (what gpuslice creates and reads, nothing more) and, in its namespace, to the Role `" + contract.RunnerStateRole + "` (OpenTofu's `kubernetes` backend: the state Secret and its lock Lease). " +
		"Default: Flux tofu-controller's `flux-system/tf-runner`. The namespace must exist. See the guide \"Runner pods: tofu-controller, Atlantis, CI\".",
	Attributes: []Attribute{
		strDefault("namespace", "flux-system", "The runner's namespace, where OpenTofu keeps its state."),
		strDefault("service_account", "tf-runner", "The runner pods' ServiceAccount."),
	},
}

// Package is the gpuslice_package resource.
var Package = Resource{
	Type: "gpuslice_package",
	Description: "A GPU package: what one slice of a GPU model is. Four kinds: a fixed `fraction` of the GPU (for example 25 % of a Tesla V100-PCIE-32GB = 8 GiB), pre-cut on every GPU; " +
		"any size, by `memory` and `compute_share` (for example 6 GiB and 20 %), cut from the GPU when a pod claims it (DRA consumable capacity); `sharing = \"time-sliced\"` with `replicas` per GPU, which shares whole GPUs without isolation; " +
		"or a `mig_profile` (for example `1g.5gb` of an NVIDIA A100-SXM4-40GB): one Multi-Instance GPU instance, isolated by the GPU itself. " +
		"The memory of fraction and any-size slices is a hard limit (an allocation past it fails, `nvidia-smi` shows the slice), their compute a share the shim paces kernel launches to; " +
		"a MIG instance's memory and compute are the GPU's own partition (no shim); a time-sliced slice sees and may use the whole GPU: nothing is enforced. Rendered as one DeviceClass whose CEL selector pins the driver, the model and the kind (and a MIG package's profile).",
	ImportID: "<name>, the DeviceClass name",
	Identity: []string{"name"},
	Block: Block{Attributes: []Attribute{
		computed(str("id", "The DeviceClass name.")),
		forceNew(required(str("name", "Package name; becomes the DeviceClass name (lowercase letters, digits and '-', e.g. v100-8gi)."))),
		required(str("gpu_model", "GPU model exactly as NVML reports it, e.g. `Tesla V100-PCIE-32GB`.")),
		{Name: "fraction", Type: cty.Number, Description: "Percent of the GPU one slice gets, pre-cut on every GPU: one of the platform's fractions (25, 50, 100 by default). Leave it out for an any-size or time-sliced package."},
		inferred(str("memory", "GPU memory of one slice, a hard limit, e.g. `6Gi`. Set it (with or without `compute_share`) for an any-size package: a whole number of 256 MiB steps, at most the GPU's memory. Left out: the fraction's share of the GPU's memory, or the compute share's (rounded down to 256 MiB), or the whole GPU for a time-sliced package, or the MIG profile's memory.")),
		inferred(Attribute{Name: "compute_share", Type: cty.Number, Description: "Percent of the GPU's compute one slice gets, 1 to 100, a share the shim paces kernel launches to. Set it (with or without `memory`) for an any-size package. Left out: the fraction, or memory's share of the GPU rounded to a whole percent (at least 1), or 100 for a time-sliced package (which nothing paces), or a MIG profile's compute slices of the GPU's (1 of 7 is 14 %)."}),
		oneOf(str("sharing", "`time-sliced`: `replicas` pods share each GPU whole, each seeing all its memory, with no memory limit and no compute share, like NVIDIA's time-slicing. Not isolated: one pod can take the memory or time the others need, and plans say so. Leave it out for isolated slices (a fraction, or any size), held to their memory and compute."), "time-sliced"),
		{Name: "replicas", Type: cty.Number, Description: fmt.Sprintf("With `sharing = \"time-sliced\"`: how many slices share one GPU, 2 to %d.", contract.MaxTimeSliceReplicas)},
		str("mig_profile", "A Multi-Instance GPU (MIG) profile of `gpu_model` as NVIDIA names it (`nvidia-smi mig -lgip`), e.g. `1g.5gb` or `3g.20gb` of an NVIDIA A100-SXM4-40GB: each slice is one MIG instance of that profile, "+
			"its memory and compute partitioned by the GPU itself (hardware isolation, no shim). The GPUs must be in MIG mode with instances of the profile created (static MIG). "+
			"Leave `fraction`, `memory`, `compute_share`, `sharing` and `replicas` out: the profile sets the size."),
		str("extended_resource_name", "Optional extended resource name (e.g. `gpuslice.dev/v100-8gi`) so pods can request the package as `resources.limits` instead of a claim: the scheduler then makes the pod's claim. "+
			"For fraction, whole-GPU and MIG packages only: the scheduler's claim asks for a count of devices and no capacity, which cannot be an any-size or time-sliced slice (it would get the device's default, not the package). "+
			"A pod asks for 1 of a fraction or MIG package and for up to its namespace's grant of a whole-GPU (fraction = 100) package; the quota of each namespace counts `requests.<name>` as it counts the package's devices."),
		computed(Attribute{Name: "memory_bytes", Type: cty.Number, Description: "GPU memory of one slice in bytes (of the whole GPU for a time-sliced package, which shares it; of the instance for a MIG package)."}),
	}},
}

// Quota is the gpuslice_quota resource.
var Quota = Resource{
	Type:        "gpuslice_quota",
	Description: "What one namespace may use: a number of slices per package (every other package gets 0) and pooled CPU and memory. Rendered as the namespace's tenant label and one ResourceQuota. Quota is an entitlement, not a reservation: a workload waits when no compatible slice is free.",
	ImportID:    "<namespace>",
	Identity:    []string{"namespace"},
	Block: Block{Attributes: []Attribute{
		computed(str("id", "The namespace.")),
		forceNew(required(str("namespace", "Tenant namespace. Created when missing; labelled as a tenant. Never deleted by gpuslice."))),
		{Name: "slices", Type: cty.Map(cty.Number), Required: true, Description: "Package name → number of slices the namespace may claim at once. Packages not listed get 0."},
		str("cpu_requests", "Pooled `requests.cpu` for the namespace, e.g. `8`. A GPU pod still needs CPU: leave headroom for it."),
		str("memory_requests", "Pooled `requests.memory`, e.g. `32Gi`."),
		str("cpu_limits", "Pooled `limits.cpu`."),
		str("memory_limits", "Pooled `limits.memory`."),
		{Name: "max_claims", Type: cty.Number, Description: "Maximum number of ResourceClaims in the namespace (`count/resourceclaims.resource.k8s.io`)."},
		{Name: "tenant_users", Type: cty.List(cty.String), Description: "Users granted the platform's `gpuslice-tenant` role in the namespace (a RoleBinding): run workloads and claim slices, but not change quotas, device classes or admission policies."},
		{Name: "tenant_groups", Type: cty.List(cty.String), Description: "Groups granted the `gpuslice-tenant` role in the namespace, e.g. `team-a` or `system:serviceaccounts:team-a`."},
	}},
}

var probe = []Attribute{
	str("http_path", "HTTP GET path; with `port`. Leave empty to use `command` or a TCP check."),
	{Name: "port", Type: cty.Number, Description: "Port for the HTTP GET or, without `http_path` and `command`, a TCP check."},
	{Name: "command", Type: cty.List(cty.String), Description: "Command run in the container; exit 0 is healthy."},
	{Name: "initial_delay_seconds", Type: cty.Number, Default: cty.NumberIntVal(0), Description: "Seconds before the first probe."},
	{Name: "period_seconds", Type: cty.Number, Default: cty.NumberIntVal(10), Description: "Seconds between probes."},
	{Name: "timeout_seconds", Type: cty.Number, Default: cty.NumberIntVal(1), Description: "Seconds before a probe times out."},
	{Name: "failure_threshold", Type: cty.Number, Default: cty.NumberIntVal(3), Description: "Consecutive failures before the probe fails."},
}

// Workload is the gpuslice_workload resource.
var Workload = Resource{
	Type:        "gpuslice_workload",
	Description: "A workload on slices of a package (one per pod, or `gpus_per_pod` whole GPUs): a Deployment, StatefulSet, Job or distributed training job (`workers`: an indexed Job with a headless Service and torchrun's rendezvous environment) whose pods get a ResourceClaim in the documented shape, with CPU and RAM sized apart from the slice, an optional persistent model volume, a Service, and models preloaded over the runtime's HTTP API.",
	ImportID:    "<namespace>/<name>",
	Identity:    []string{"namespace", "name"},
	Waits:       true,
	Block: Block{
		Attributes: []Attribute{
			computed(str("id", "`<namespace>/<name>`.")),
			forceNew(required(str("namespace", "Namespace to run in; it needs a gpuslice_quota granting the package."))),
			forceNew(required(str("name", "Workload name (lowercase letters, digits and '-'); names the Deployment/StatefulSet/Job, its claim template, volume and Service."))),
			required(str("package", "Package whose slice each replica gets, e.g. `gpuslice_package.small.name`.")),
			forceNew(oneOf(strDefault("kind", "deployment", "`deployment`, `statefulset` (one model volume per replica) or `job` (runs to completion)."), "deployment", "statefulset", "job")),
			{Name: "replicas", Type: cty.Number, Default: cty.NumberIntVal(1), Description: "Pods to run; each takes `gpus_per_pod` slices of the package. With `autoscaling`, only the count the workload is created with (raised to `min_replicas`): the autoscaler owns it afterwards."},
			{Name: "gpus_per_pod", Type: cty.Number, Default: cty.NumberIntVal(1), Description: "Devices of the package each pod gets, all on one node, each on a different GPU: one claim asking for exactly this many. More than 1 needs a whole-GPU package (`fraction = 100`); the namespace's quota must grant at least this many."},
			{Name: "workers", Type: cty.Number, Default: cty.NumberIntVal(1), Description: "With `kind = \"job\"`, 2 or more makes a distributed training job: an indexed Job of this many pods (each with `gpus_per_pod` slices) and a headless Service, with the rendezvous environment torchrun reads (`MASTER_ADDR`, `MASTER_PORT` 29500, `WORLD_SIZE`, `RANK`, `PET_*`). Leave `replicas` at 1. Plan fails when the whole gang does not fit the namespace's quota."},
			oneOf(str("training_operator", "With `workers` of 2 or more, hands the job to a Kubeflow operator instead of the indexed Job: `trainjob` renders Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1) on a TrainingRuntime of its own (`workers` nodes, each pod with `gpus_per_pod` slices and as many processes); `pytorchjob` renders the Kubeflow Training Operator's PyTorchJob (kubeflow.org/v1: a Master and `workers` − 1 Workers), for clusters that still run the operator Trainer replaces. The operator then creates the pods and the rendezvous environment. Plan fails when the cluster does not serve the kind. Leave it unset for the indexed Job, which needs no operator."), "trainjob", "pytorchjob"),
			{Name: "labels", Type: cty.Map(cty.String), Description: "Extra labels for the workload's pods."},
			{Name: "preload_models", Type: cty.List(cty.String), Description: "Models pulled once the workload is ready, by a one-off Job calling the runtime's HTTP API (`POST /api/pull`) through the Service; tenants cannot `kubectl exec`. Needs `expose`."},
			strDefault("preload_image", "curlimages/curl:8.11.1", "Image of the preload Job; it needs `sh` and `curl`."),
			oneOf(strDefault("wait_for", "ready", "What apply waits for: `ready` (pods ready; a job complete, so that a plan after it finishes is empty), `scheduled` (every replica has its slice and a node) or `none`. A job that runs longer than `timeout` needs `scheduled`."), "ready", "scheduled", "none"),
			strDefault("timeout", "10m", "How long apply waits (Go duration, e.g. `90s`, `10m`)."),
			computed(str("phase", "Running, Pending, Succeeded or Failed, as diagnosed from the cluster.")),
			computed(str("reason", "Why the workload is not running, with what to do (e.g. waiting for a free slice).")),
			computed(str("claim", "Name of the first replica's ResourceClaim; once a job has completed, the one it ran with.")),
			computed(str("node", "Node of the first replica; once a job has completed, the one it ran on.")),
			computed(str("device", "Slice (device) allocated to the first replica, e.g. `gpu-0-25pct-1`; comma-separated when `gpus_per_pod` is more than 1. Once a job has completed, the one it ran on: its claim is released, and the attribute (and any output naming it) stays as it was.")),
			computed(str("service_address", "In-cluster address of the Service, `<name>.<namespace>.svc:<port>`, when exposed.")),
		},
		Blocks: []Block{
			{
				Name: "container", Nesting: NestingSingle, Required: true,
				Description: "The container that uses the slice.",
				Attributes: []Attribute{
					required(str("image", "Image with an explicit tag, e.g. `ollama/ollama:0.24.0`.")),
					oneOf(str("image_pull_policy", "`Always`, `IfNotPresent` or `Never`; unset leaves Kubernetes' default (`Always` for `:latest` or no tag, else `IfNotPresent`)."), "Always", "IfNotPresent", "Never"),
					{Name: "command", Type: cty.List(cty.String), Description: "Entrypoint override."},
					{Name: "args", Type: cty.List(cty.String), Description: "Arguments."},
					{Name: "env", Type: cty.Map(cty.String), Description: "Environment variables, e.g. `OLLAMA_CONTEXT_LENGTH = \"16384\"`."},
					str("cpu_request", "CPU request, e.g. `1`. Counts against the namespace's pooled quota."),
					str("memory_request", "RAM request, e.g. `2Gi`. Separate from the slice's GPU memory."),
					str("cpu_limit", "CPU limit."),
					str("memory_limit", "RAM limit, e.g. `4Gi`. Too low and the container is OOMKilled (exit 137) while loading a model."),
				},
				Blocks: []Block{
					{Name: "port", Nesting: NestingList, Description: "A port the container listens on.", Attributes: []Attribute{
						{Name: "container_port", Type: cty.Number, Required: true, Description: "Port number."},
						strDefault("name", "http", "Port name."),
						oneOf(strDefault("protocol", "TCP", "`TCP` or `UDP`."), "TCP", "UDP"),
					}},
					{Name: "readiness_probe", Nesting: NestingSingle, Description: "When the container is ready for traffic.", Attributes: probe},
					{Name: "liveness_probe", Nesting: NestingSingle, Description: "When the container must be restarted.", Attributes: probe},
				},
			},
			{
				Name: "model_volume", Nesting: NestingSingle,
				Description: "A persistent volume for models, so they survive pod restarts.",
				Attributes: []Attribute{
					required(str("size", "Volume size, e.g. `20Gi`.")),
					required(str("mount_path", "Where the runtime keeps its models, e.g. `/root/.ollama`.")),
					str("storage_class", "StorageClass; empty uses the cluster default."),
					oneOf(strDefault("access_mode", "ReadWriteOnce", "`ReadWriteOnce`, `ReadWriteMany` or `ReadWriteOncePod`."), "ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"),
					{Name: "delete_on_destroy", Type: cty.Bool, Default: cty.False,
						Description: "Delete the volume, and the models in it, when the workload is destroyed. By default it is kept: destroying or replacing the workload (a taint, an immutable change) releases the volume from gpuslice, and the workload's next creation at the same address takes it back with its models."},
				},
			},
			{
				Name: "model", Nesting: NestingSingle,
				Description: "The language model the workload serves. Plan checks that its weights, KV cache and the runtime's overhead fit the slice, and that the context is what you meant.",
				Attributes: []Attribute{
					required(str("name", "Model reference as the runtime pulls it, e.g. `llama3.2:3b` (rows in schemas/tables/llms.yaml, or a table file of your own).")),
					{Name: "context_length", Type: cty.Number, Description: "Context window in tokens. Unset: the runtime's variable (e.g. `OLLAMA_CONTEXT_LENGTH` in `container.env`) or its default (Ollama: 4096). Set it to the same value as that variable."},
					str("kv_cache_type", "KV cache element type: `f16`, `q8_0` or `q4_0`. Unset: the runtime's variable (`OLLAMA_KV_CACHE_TYPE`) or its default (f16)."),
				},
			},
			{
				Name: "expose", Nesting: NestingSingle,
				Description: "A Service in front of the workload.",
				Attributes: []Attribute{
					{Name: "port", Type: cty.Number, Required: true, Description: "Service port."},
					{Name: "target_port", Type: cty.Number, Description: "Container port; defaults to `port`."},
					oneOf(strDefault("type", "ClusterIP", "`ClusterIP`, `NodePort` or `LoadBalancer`."), "ClusterIP", "NodePort", "LoadBalancer"),
				},
			},
			autoscaling,
		},
	},
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// stringList is a list(string) default.
func stringList(items []string) cty.Value {
	vals := make([]cty.Value, len(items))
	for i, s := range items {
		vals[i] = cty.StringVal(s)
	}
	return cty.ListVal(vals)
}
