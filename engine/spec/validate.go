package spec

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// DefaultFractions are the slice sizes node plugins offer unless the
// platform says otherwise.
var DefaultFractions = []int{25, 50, 100}

// DefaultSchedulerUsers are the users kube-scheduler authenticates as
// unless the platform says otherwise: kubeadm's name for it, and the user
// Kubernetes' bootstrap RBAC gives the scheduler's role to.
var DefaultSchedulerUsers = []string{"system:kube-scheduler"}

// SchedulerUsersOrDefault returns the users the platform's policies take
// for kube-scheduler: its scheduler_users, or the default where a platform
// built in Go left them out.
func (p *Platform) SchedulerUsersOrDefault() []string {
	if len(p.SchedulerUsers) > 0 {
		return p.SchedulerUsers
	}
	return DefaultSchedulerUsers
}

// MaxWorkloadNameLength leaves room for the suffixes of derived objects
// ("-preload-<hash>") within Kubernetes' 63-character names.
const MaxWorkloadNameLength = 45

// Fractions returns the fractions the platform offers.
func (s *Stack) Fractions() []int {
	if s.Platform != nil && len(s.Platform.Fractions) > 0 {
		return s.Platform.Fractions
	}
	return DefaultFractions
}

// Validate checks the whole stack and returns every problem found, each on
// its resource and attribute with what to change. extraPackages names
// packages that exist outside this stack (e.g. already in the cluster) and
// may be referenced.
func Validate(s *Stack, models tables.GPUModels, extraPackages ...string) diag.Diagnostics {
	v := &validator{}
	if s.Platform != nil {
		v.platform(s.Platform)
	}
	fractions := s.Fractions()
	packages := map[string]bool{}
	for _, name := range extraPackages {
		packages[name] = true
	}
	seen := map[string]string{}
	for _, p := range s.Packages {
		v.pkg(p, models, fractions, s.Platform)
		if prev, dup := seen[p.Name]; dup {
			v.errorf(p.Address, "name", "Duplicate package name", "%q is also the name of %s; package names become DeviceClass names and must be unique", p.Name, prev)
		}
		seen[p.Name] = p.Address
		packages[p.Name] = true
	}
	quotaNS := map[string]string{}
	for _, q := range s.Quotas {
		v.quota(q, packages)
		v.notSystemNamespace(q, s.Platform)
		if prev, dup := quotaNS[q.Namespace]; dup {
			v.errorf(q.Address, "namespace", "Duplicate quota", "namespace %q already has a quota in %s; merge the two", q.Namespace, prev)
		}
		quotaNS[q.Namespace] = q.Address
	}
	workloads := map[string]string{}
	for _, w := range s.Workloads {
		v.workload(w, packages)
		key := w.Namespace + "/" + w.Name
		if prev, dup := workloads[key]; dup {
			v.errorf(w.Address, "name", "Duplicate workload", "%s is also declared by %s", key, prev)
		}
		workloads[key] = w.Address
	}
	return v.diags
}

type validator struct{ diags diag.Diagnostics }

func (v *validator) errorf(addr, attr, summary, format string, args ...any) {
	v.diags = append(v.diags, diag.Errorf(addr, attr, summary, format, args...))
}

func (v *validator) warningf(addr, attr, summary, format string, args ...any) {
	v.diags = append(v.diags, diag.Warningf(addr, attr, summary, format, args...))
}

func (v *validator) dnsLabel(addr, attr, value, what string) bool {
	if value == "" {
		v.errorf(addr, attr, "Missing "+what, "set %s to a name of lowercase letters, digits and '-'", attr)
		return false
	}
	if errs := validation.IsDNS1123Label(value); len(errs) > 0 {
		v.errorf(addr, attr, "Invalid "+what, "%q is not a valid Kubernetes name: %s", value, strings.Join(errs, "; "))
		return false
	}
	return true
}

func (v *validator) quantity(addr, attr, value string) (resource.Quantity, bool) {
	if value == "" {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(value)
	if err != nil {
		v.errorf(addr, attr, "Invalid quantity", "%q is not a Kubernetes quantity: write e.g. \"500m\" or \"2\" for CPU, \"512Mi\" or \"4Gi\" for memory", value)
		return q, false
	}
	if q.Sign() < 0 {
		v.errorf(addr, attr, "Negative quantity", "%q is negative; use zero or more", value)
		return q, false
	}
	return q, true
}

func (v *validator) quota(q *Quota, packages map[string]bool) {
	v.dnsLabel(q.Address, "namespace", q.Namespace, "namespace")
	if len(q.Slices) == 0 {
		v.errorf(q.Address, "slices", "No slices granted", "grant at least one package, e.g. slices = { (gpuslice_package.small.name) = 2 }")
	}
	for _, name := range sortedKeys(q.Slices) {
		attr := fmt.Sprintf("slices[%q]", name)
		if !packages[name] {
			v.errorf(q.Address, attr, "Unknown package", "no gpuslice_package is named %q%s; declare it or fix the name", name, diag.Suggest(name, mapKeys(packages)))
		}
		if q.Slices[name] < 0 {
			v.errorf(q.Address, attr, "Negative slice count", "%d slices: use 0 or more", q.Slices[name])
		}
	}
	v.quantity(q.Address, "cpu_requests", q.CPURequests)
	v.quantity(q.Address, "memory_requests", q.MemoryRequests)
	v.quantity(q.Address, "cpu_limits", q.CPULimits)
	v.quantity(q.Address, "memory_limits", q.MemoryLimits)
	if q.MaxClaims != nil && *q.MaxClaims < 0 {
		v.errorf(q.Address, "max_claims", "Negative claim count", "%d: use 0 or more", *q.MaxClaims)
	}
	v.subjects(q.Address, "tenant_users", q.TenantUsers)
	v.subjects(q.Address, "tenant_groups", q.TenantGroups)
}

// notSystemNamespace refuses a quota on a namespace that must never be a
// tenant: the admission policies would refuse what runs there (the node
// plugin needs host paths and privileges; so do cluster components).
func (v *validator) notSystemNamespace(q *Quota, p *Platform) {
	switch {
	case p != nil && q.Namespace == p.Namespace:
		v.errorf(q.Address, "namespace", "Platform namespace as tenant", "%q is the gpuslice_platform namespace, where the node plugin runs with host paths and privileges the tenant policies refuse; give the tenant a namespace of its own", q.Namespace)
	case strings.HasPrefix(q.Namespace, "kube-"):
		v.errorf(q.Address, "namespace", "System namespace as tenant", "%q holds Kubernetes' own components, which the tenant policies would refuse; give the tenant a namespace of its own", q.Namespace)
	}
}

// subjects checks user or group names for the tenant RoleBinding: the API
// server accepts any non-empty name, so only blanks and repeats are caught.
func (v *validator) subjects(addr, attr string, names []string) {
	seen := map[string]bool{}
	for i, name := range names {
		at := fmt.Sprintf("%s[%d]", attr, i)
		switch {
		case strings.TrimSpace(name) == "":
			v.errorf(addr, at, "Empty name", "%s lists an empty name; remove it or write the user or group as your cluster's authentication reports it", attr)
		case seen[name]:
			v.errorf(addr, at, "Duplicate name", "%q is listed twice in %s", name, attr)
		}
		seen[name] = true
	}
}

func (v *validator) workload(w *Workload, packages map[string]bool) {
	a := w.Address
	v.dnsLabel(a, "namespace", w.Namespace, "namespace")
	if v.dnsLabel(a, "name", w.Name, "workload name") && len(w.Name) > MaxWorkloadNameLength {
		v.errorf(a, "name", "Workload name too long", "%q has %d characters; use at most %d so the names derived from it stay within Kubernetes' 63", w.Name, len(w.Name), MaxWorkloadNameLength)
	}
	if w.Package == "" {
		v.errorf(a, "package", "Missing package", "set package to a gpuslice_package name, e.g. gpuslice_package.small.name")
	} else if !packages[w.Package] {
		v.errorf(a, "package", "Unknown package", "no gpuslice_package is named %q%s", w.Package, diag.Suggest(w.Package, mapKeys(packages)))
	}
	switch w.Kind {
	case KindDeployment, KindStatefulSet, KindJob:
	default:
		v.errorf(a, "kind", "Invalid kind", "%q: use \"deployment\", \"statefulset\" or \"job\"", w.Kind)
	}
	if w.Replicas < 0 || (w.Kind == KindJob && w.Replicas < 1) {
		v.errorf(a, "replicas", "Invalid replica count", "%d: use 1 or more (0 only for a deployment or statefulset you want scaled down)", w.Replicas)
	}
	v.container(a, &w.Container)
	v.autoscaling(w)
	v.multiGPU(w)
	if w.ModelVolume != nil {
		v.modelVolume(w)
	}
	if w.Model != nil {
		v.model(a, w.Model)
	}
	if w.Expose != nil {
		v.expose(a, w.Expose)
	}
	v.preload(w)
	switch w.WaitFor {
	case WaitReady, WaitScheduled, WaitNone:
	default:
		v.errorf(a, "wait_for", "Invalid wait_for", "%q: use \"ready\", \"scheduled\" or \"none\"", w.WaitFor)
	}
	if d, err := time.ParseDuration(w.Timeout); err != nil || d <= 0 {
		v.errorf(a, "timeout", "Invalid timeout", "%q: write a positive duration such as \"90s\" or \"10m\"", w.Timeout)
	}
}

// modelVolume checks a workload's model volume: its size, where it is
// mounted, and whether its pods can share it.
func (v *validator) modelVolume(w *Workload) {
	a, mv := w.Address, w.ModelVolume
	if q, ok := v.quantity(a, "model_volume.size", mv.Size); ok && q.Sign() == 0 {
		v.errorf(a, "model_volume.size", "Empty volume", "size must be more than zero, e.g. \"20Gi\"")
	} else if mv.Size == "" {
		v.errorf(a, "model_volume.size", "Missing volume size", "set size, e.g. \"20Gi\"")
	}
	if !path.IsAbs(mv.MountPath) {
		v.errorf(a, "model_volume.mount_path", "Relative mount path", "%q must be an absolute path such as /root/.ollama", mv.MountPath)
	}
	switch mv.AccessMode {
	case "ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod":
	default:
		v.errorf(a, "model_volume.access_mode", "Invalid access mode", "%q: use ReadWriteOnce, ReadWriteMany or ReadWriteOncePod", mv.AccessMode)
	}
	if w.Kind == KindDeployment && w.Replicas > 1 && mv.AccessMode != "ReadWriteMany" {
		v.errorf(a, "model_volume.access_mode", "Volume cannot be shared", "%d replicas of a deployment share one %s volume, which only one node can mount; use kind = \"statefulset\" (a volume per replica) or access_mode = \"ReadWriteMany\"", w.Replicas, mv.AccessMode)
	}
}

// model checks the model a workload serves.
func (v *validator) model(a string, m *Model) {
	if strings.TrimSpace(m.Name) == "" || strings.ContainsAny(m.Name, " \t\n") {
		v.errorf(a, "model.name", "Invalid model name", "%q: use a model reference such as \"llama3.2:3b\"", m.Name)
	}
	if m.ContextLength < 0 {
		v.errorf(a, "model.context_length", "Invalid context length", "%d: use a number of tokens such as 16384, or leave it unset", m.ContextLength)
	}
	switch m.KVCacheType {
	case "", "f32", "f16", "q8_0", "q4_0":
	default:
		v.errorf(a, "model.kv_cache_type", "Invalid KV cache type", "%q: use f16, q8_0 or q4_0", m.KVCacheType)
	}
}

// expose checks the Service a workload is exposed by.
func (v *validator) expose(a string, e *Expose) {
	if e.Port < 1 || e.Port > 65535 {
		v.errorf(a, "expose.port", "Invalid port", "%d is not a port between 1 and 65535", e.Port)
	}
	if e.TargetPort != 0 && (e.TargetPort < 1 || e.TargetPort > 65535) {
		v.errorf(a, "expose.target_port", "Invalid port", "%d is not a port between 1 and 65535", e.TargetPort)
	}
	switch e.Type {
	case "ClusterIP", "NodePort", "LoadBalancer":
	default:
		v.errorf(a, "expose.type", "Invalid service type", "%q: use ClusterIP, NodePort or LoadBalancer", e.Type)
	}
}

// preload checks the models a workload preloads and how.
func (v *validator) preload(w *Workload) {
	a := w.Address
	if len(w.PreloadModels) > 0 && w.Expose == nil {
		v.errorf(a, "preload_models", "Preloading needs a Service", "models are pulled over the runtime's HTTP API through the workload's Service: add an expose block (e.g. expose { port = 11434 })")
	}
	for i, m := range w.PreloadModels {
		if strings.TrimSpace(m) == "" || strings.ContainsAny(m, " \t\n\"'\\$`") {
			v.errorf(a, fmt.Sprintf("preload_models[%d]", i), "Invalid model name", "%q: use a model reference such as \"llama3.2:3b\"", m)
		}
	}
	if len(w.PreloadModels) > 0 && strings.TrimSpace(w.PreloadImage) == "" {
		v.errorf(a, "preload_image", "Missing preload image", "set an image with sh and curl, e.g. \"curlimages/curl:8.11.1\"")
	}
}

func (v *validator) container(a string, c *Container) {
	if strings.TrimSpace(c.Image) == "" || strings.ContainsAny(c.Image, " \t\n") {
		v.errorf(a, "container.image", "Invalid image", "%q: write an image reference with a tag, e.g. \"ollama/ollama:0.24.0\"", c.Image)
	}
	for _, name := range sortedKeys(c.Env) {
		attr := fmt.Sprintf("container.env[%q]", name)
		if errs := validation.IsEnvVarName(name); len(errs) > 0 {
			v.errorf(a, attr, "Invalid environment variable name", "%q: %s", name, strings.Join(errs, "; "))
		} else if contract.ReservedEnv(name) {
			v.errorf(a, attr, "Reserved environment variable", "%s is set by the gpuslice node plugin to enforce the slice and cannot be overridden; remove it", name)
		}
	}
	cpuReq, hasCPUReq := v.quantity(a, "container.cpu_request", c.CPURequest)
	cpuLim, hasCPULim := v.quantity(a, "container.cpu_limit", c.CPULimit)
	memReq, hasMemReq := v.quantity(a, "container.memory_request", c.MemoryRequest)
	memLim, hasMemLim := v.quantity(a, "container.memory_limit", c.MemoryLimit)
	if hasCPUReq && hasCPULim && cpuReq.Cmp(cpuLim) > 0 {
		v.errorf(a, "container.cpu_request", "Request above limit", "cpu_request %s is more than cpu_limit %s; raise the limit or lower the request", c.CPURequest, c.CPULimit)
	}
	if hasMemReq && hasMemLim && memReq.Cmp(memLim) > 0 {
		v.errorf(a, "container.memory_request", "Request above limit", "memory_request %s is more than memory_limit %s; raise the limit or lower the request", c.MemoryRequest, c.MemoryLimit)
	}
	ports := map[int32]bool{}
	names := map[string]bool{}
	for i, p := range c.Ports {
		attr := fmt.Sprintf("container.port[%d]", i)
		if p.ContainerPort < 1 || p.ContainerPort > 65535 {
			v.errorf(a, attr+".container_port", "Invalid port", "%d is not a port between 1 and 65535", p.ContainerPort)
		} else if ports[p.ContainerPort] {
			v.errorf(a, attr+".container_port", "Duplicate port", "%d is declared twice", p.ContainerPort)
		}
		if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
			v.errorf(a, attr+".name", "Invalid port name", "%q: %s", p.Name, strings.Join(errs, "; "))
		} else if names[p.Name] {
			v.errorf(a, attr+".name", "Duplicate port name", "%q is used twice; give each port its own name", p.Name)
		}
		if p.Protocol != "TCP" && p.Protocol != "UDP" {
			v.errorf(a, attr+".protocol", "Invalid protocol", "%q: use TCP or UDP", p.Protocol)
		}
		ports[p.ContainerPort], names[p.Name] = true, true
	}
	for attr, p := range map[string]*Probe{"container.readiness_probe": c.ReadinessProbe, "container.liveness_probe": c.LivenessProbe} {
		if p == nil {
			continue
		}
		switch {
		case p.HTTPPath != "" && len(p.Command) > 0:
			v.errorf(a, attr, "Ambiguous probe", "set either http_path (with port) or command, not both")
		case p.HTTPPath != "" && p.Port == 0:
			v.errorf(a, attr+".port", "Missing probe port", "an HTTP probe needs the port to call")
		case p.HTTPPath == "" && len(p.Command) == 0 && p.Port == 0:
			v.errorf(a, attr, "Empty probe", "set http_path and port, command, or port alone for a TCP check")
		case p.HTTPPath != "" && !strings.HasPrefix(p.HTTPPath, "/"):
			v.errorf(a, attr+".http_path", "Invalid path", "%q must start with /", p.HTTPPath)
		}
		if p.Port < 0 || p.Port > 65535 {
			v.errorf(a, attr+".port", "Invalid port", "%d is not a port between 1 and 65535", p.Port)
		}
		if p.PeriodSeconds < 1 || p.TimeoutSeconds < 1 || p.FailureThreshold < 1 || p.InitialDelaySeconds < 0 {
			v.errorf(a, attr, "Invalid probe timing", "period_seconds, timeout_seconds and failure_threshold must be at least 1, initial_delay_seconds at least 0")
		}
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func mapKeys(m map[string]bool) []string { return sortedKeys(m) }
