package readback

import (
	"context"
	"fmt"
	"regexp"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// WorkloadReads are the resources Workload reads in the workload's
// namespace, given its prior (nil, or an import's: every kind a workload
// may have). With a prior it reads the kinds the prior renders:
// its controller's (another controller kind only when that one is gone),
// its volume's, Service's, preload Jobs' and autoscaler's when it has
// them, so a namespace whose workloads have none pays no read for them.
func WorkloadReads(prior *spec.Workload) []view.Resource {
	if importing(prior) {
		return []view.Resource{deployments, statefulSets, jobs, volumes, services, autoscalers}
	}
	var out []view.Resource
	if !prior.ByOperator() {
		out = append(out, controllerOf(prior.Kind))
	}
	if prior.ModelVolume != nil && prior.Kind != spec.KindStatefulSet {
		out = append(out, volumes)
	}
	if prior.Expose != nil {
		out = append(out, services)
	}
	if len(prior.PreloadModels) > 0 {
		out = append(out, jobs)
	}
	if prior.Autoscaling != nil && prior.Autoscaling.KEDA == nil {
		out = append(out, autoscalers)
	}
	return out
}

// importing says whether prior is not a workload's configuration but
// nothing, or an import's state, which names the workload alone (without
// the package every configuration sets).
func importing(prior *spec.Workload) bool { return prior == nil || prior.Package == "" }

// The kinds Workload reads.
var (
	deployments  = view.ManagedKind("apps", "Deployment")
	statefulSets = view.ManagedKind("apps", "StatefulSet")
	jobs         = view.ManagedKind("batch", "Job")
	volumes      = view.ManagedKind("", "PersistentVolumeClaim")
	services     = view.ManagedKind("", "Service")
	autoscalers  = view.ManagedKind("autoscaling", "HorizontalPodAutoscaler")
)

// controllerOf is the kind read for a workload's controller (an
// operator's custom kinds are read when first asked for).
func controllerOf(kind string) view.Resource {
	switch kind {
	case spec.KindStatefulSet:
		return statefulSets
	case spec.KindJob:
		return jobs
	}
	return deployments
}

// Workload reads the gpuslice_workload ns/name from its Deployment,
// StatefulSet or Job, volume, Service and preload Job; nil when it is not
// applied. wait_for and timeout, which only apply uses, and the model
// block come from prior (else their defaults); prior's kinds are read
// (WorkloadReads), so an object of a kind prior does not have — a Service
// of a workload without expose — is not looked for.
func Workload(ctx context.Context, v *view.View, ns, name string, prior *spec.Workload) (*spec.Workload, error) {
	v.WarmIn([]string{ns}, WorkloadReads(prior)...)
	imported := importing(prior)
	if prior == nil {
		prior = &spec.Workload{WaitFor: spec.WaitReady, Timeout: "10m"}
	}
	// The model block only feeds plan-time checks; nothing in the cluster
	// records it.
	w := &spec.Workload{Namespace: ns, Name: name, WaitFor: prior.WaitFor, Timeout: prior.Timeout, PreloadImage: prior.PreloadImage, Model: prior.Model}
	if w.PreloadImage == "" {
		w.PreloadImage = defaultPreloadImage
	}
	c, err := readController(ctx, v, w, prior)
	if err != nil {
		return nil, err
	}
	if c == nil || len(c.template.Spec.Containers) == 0 {
		return nil, nil
	}
	template := c.template
	w.Package = template.Labels[contract.LabelPackage]
	readLabels(w, template)
	container := template.Spec.Containers[0]
	w.Container = readContainer(container, &prior.Container)
	readGPUsPerPod(w, template)

	if err := readVolume(ctx, v, w, container, c.claimTemplates, prior.ModelVolume); err != nil {
		return nil, err
	}
	if imported || prior.Expose != nil {
		if err := readService(ctx, v, w, prior.Expose); err != nil {
			return nil, err
		}
	}
	if imported || len(prior.PreloadModels) > 0 {
		if err := readPreload(ctx, v, w); err != nil {
			return nil, err
		}
	}
	if imported || prior.Autoscaling != nil || c.autoscaledBy != "" {
		if err := readAutoscaling(ctx, v, w, prior, c.autoscaledBy); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// controller is what a workload's controller says about its pods.
type controller struct {
	template       corev1.PodTemplateSpec
	claimTemplates []corev1.PersistentVolumeClaim // a StatefulSet's
	autoscaledBy   string
}

// readController finds the workload's controller gpuslice manages (its
// Deployment, StatefulSet, Job, PyTorchJob or TrainJob: the kind prior
// had first, then the others in that order) and reads its kind and
// replicas into w; nil when there is none.
func readController(ctx context.Context, v *view.View, w, prior *spec.Workload) (*controller, error) {
	reads := []func(context.Context, *view.View, *spec.Workload) (*controller, error){readDeployment, readStatefulSet, readJob, readOperatorJob}
	first := 0
	switch {
	case prior.ByOperator():
		first = 3
	case prior.Kind == spec.KindStatefulSet:
		first = 1
	case prior.Kind == spec.KindJob:
		first = 2
	}
	reads = append(append(reads[first:first+1:first+1], reads[:first]...), reads[first+1:]...)
	for _, read := range reads {
		c, err := read(ctx, v, w)
		if c != nil || err != nil {
			return c, err
		}
	}
	return nil, nil
}

func readDeployment(ctx context.Context, v *view.View, w *spec.Workload) (*controller, error) {
	d, err := get[appsv1.Deployment](ctx, v, "apps", "Deployment", w.Namespace, w.Name)
	if d == nil || err != nil || !managed(d.Labels) {
		return nil, err
	}
	w.Kind, w.Replicas = spec.KindDeployment, deref(d.Spec.Replicas, 1)
	return &controller{template: d.Spec.Template, autoscaledBy: d.Annotations[objects.AnnotationAutoscaledBy]}, nil
}

func readStatefulSet(ctx context.Context, v *view.View, w *spec.Workload) (*controller, error) {
	s, err := get[appsv1.StatefulSet](ctx, v, "apps", "StatefulSet", w.Namespace, w.Name)
	if s == nil || err != nil || !managed(s.Labels) {
		return nil, err
	}
	w.Kind, w.Replicas = spec.KindStatefulSet, deref(s.Spec.Replicas, 1)
	return &controller{template: s.Spec.Template, autoscaledBy: s.Annotations[objects.AnnotationAutoscaledBy], claimTemplates: s.Spec.VolumeClaimTemplates}, nil
}

func readJob(ctx context.Context, v *view.View, w *spec.Workload) (*controller, error) {
	j, err := get[batchv1.Job](ctx, v, "batch", "Job", w.Namespace, w.Name)
	if j == nil || err != nil || !managed(j.Labels) {
		return nil, err
	}
	w.Kind, w.Replicas = spec.KindJob, deref(j.Spec.Parallelism, 1)
	readWorkers(w, j)
	return &controller{template: j.Spec.Template}, nil
}

// readOperatorJob finds a PyTorchJob or TrainJob.
func readOperatorJob(ctx context.Context, v *view.View, w *spec.Workload) (*controller, error) {
	for _, read := range []func(context.Context, *view.View, *spec.Workload) (corev1.PodTemplateSpec, bool, error){readPyTorchJob, readTrainJob} {
		template, found, err := read(ctx, v, w)
		if err != nil {
			return nil, err
		}
		if found {
			return &controller{template: template}, nil
		}
	}
	return nil, nil
}

// readLabels reads the labels the configuration gave the workload's pods:
// those of its pod template that neither gpuslice nor the Job controller
// sets.
func readLabels(w *spec.Workload, template corev1.PodTemplateSpec) {
	for k, v := range template.Labels {
		switch k {
		case "app.kubernetes.io/name", objects.LabelWorkload, contract.LabelPackage,
			// The Job controller labels its pod template itself.
			"controller-uid", "job-name", "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name":
		default:
			if w.Labels == nil {
				w.Labels = map[string]string{}
			}
			w.Labels[k] = v
		}
	}
}

const defaultPreloadImage = "curlimages/curl:8.11.1"

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func readContainer(k corev1.Container, prior *spec.Container) spec.Container {
	c := spec.Container{Image: k.Image, Command: k.Command, Args: k.Args}
	// The API server fills in a pull policy nobody set: only one the
	// configuration has is gpuslice's to compare.
	if prior.ImagePullPolicy != "" {
		c.ImagePullPolicy = string(k.ImagePullPolicy)
	}
	for _, e := range k.Env {
		if c.Env == nil {
			c.Env = map[string]string{}
		}
		c.Env[e.Name] = e.Value
	}
	if v, ok := k.Resources.Requests[corev1.ResourceCPU]; ok {
		c.CPURequest = quantity(v, prior.CPURequest)
	}
	if v, ok := k.Resources.Requests[corev1.ResourceMemory]; ok {
		c.MemoryRequest = quantity(v, prior.MemoryRequest)
	}
	if v, ok := k.Resources.Limits[corev1.ResourceCPU]; ok {
		c.CPULimit = quantity(v, prior.CPULimit)
	}
	if v, ok := k.Resources.Limits[corev1.ResourceMemory]; ok {
		c.MemoryLimit = quantity(v, prior.MemoryLimit)
	}
	for _, p := range k.Ports {
		c.Ports = append(c.Ports, spec.Port{ContainerPort: p.ContainerPort, Name: p.Name, Protocol: string(p.Protocol)})
	}
	c.ReadinessProbe = readProbe(k.ReadinessProbe)
	c.LivenessProbe = readProbe(k.LivenessProbe)
	return c
}

func readProbe(p *corev1.Probe) *spec.Probe {
	if p == nil {
		return nil
	}
	out := &spec.Probe{InitialDelaySeconds: p.InitialDelaySeconds, PeriodSeconds: p.PeriodSeconds, TimeoutSeconds: p.TimeoutSeconds, FailureThreshold: p.FailureThreshold}
	switch {
	case p.HTTPGet != nil:
		out.HTTPPath, out.Port = p.HTTPGet.Path, p.HTTPGet.Port.IntVal
	case p.Exec != nil:
		out.Command = p.Exec.Command
	case p.TCPSocket != nil:
		out.Port = p.TCPSocket.Port.IntVal
	}
	return out
}

func readVolume(ctx context.Context, v *view.View, w *spec.Workload, k corev1.Container, claimTemplates []corev1.PersistentVolumeClaim, prior *spec.ModelVolume) error {
	if len(k.VolumeMounts) == 0 {
		return nil
	}
	var pvcSpec *corev1.PersistentVolumeClaimSpec
	var annotations map[string]string
	if w.Kind == spec.KindStatefulSet {
		for i := range claimTemplates {
			if claimTemplates[i].Name == render.VolumeName(w) {
				pvcSpec, annotations = &claimTemplates[i].Spec, claimTemplates[i].Annotations
			}
		}
	} else {
		pvc, err := get[corev1.PersistentVolumeClaim](ctx, v, "", "PersistentVolumeClaim", w.Namespace, render.VolumeName(w))
		if pvc == nil || err != nil {
			return err
		}
		pvcSpec, annotations = &pvc.Spec, pvc.Annotations
	}
	if pvcSpec == nil {
		return nil
	}
	if prior == nil {
		prior = &spec.ModelVolume{}
	}
	mv := &spec.ModelVolume{MountPath: k.VolumeMounts[0].MountPath, AccessMode: "ReadWriteOnce",
		DeleteOnDestroy: annotations[objects.AnnotationOnDestroy] == "delete"}
	if size, ok := pvcSpec.Resources.Requests[corev1.ResourceStorage]; ok {
		mv.Size = quantity(size, prior.Size)
	}
	if len(pvcSpec.AccessModes) > 0 {
		mv.AccessMode = string(pvcSpec.AccessModes[0])
	}
	// The cluster fills in its default class when none was asked for.
	if pvcSpec.StorageClassName != nil && prior.StorageClass != "" {
		mv.StorageClass = *pvcSpec.StorageClassName
	} else if pvcSpec.StorageClassName != nil && prior.Size == "" {
		mv.StorageClass = *pvcSpec.StorageClassName
	}
	w.ModelVolume = mv
	return nil
}

func readService(ctx context.Context, v *view.View, w *spec.Workload, prior *spec.Expose) error {
	svc, err := get[corev1.Service](ctx, v, "", "Service", w.Namespace, w.Name)
	if svc == nil || err != nil {
		return err
	}
	if !managed(svc.Labels) || len(svc.Spec.Ports) == 0 {
		return nil
	}
	p := svc.Spec.Ports[0]
	e := &spec.Expose{Port: p.Port, Type: string(svc.Spec.Type)}
	// target_port left out means the same as port.
	if p.TargetPort.IntVal != p.Port || (prior != nil && prior.TargetPort != 0) {
		e.TargetPort = p.TargetPort.IntVal
	}
	w.Expose = e
	return nil
}

var pulling = regexp.MustCompile(`(?m)^echo pulling (\S+)$`)

func readPreload(ctx context.Context, v *view.View, w *spec.Workload) error {
	objs, err := v.ByIndex(ctx, view.ManagedKind("batch", "Job"), w.Namespace, view.IndexPreloadFor, w.Namespace+"/"+w.Name)
	if err != nil {
		return fmt.Errorf("read the preload Jobs of %s/%s: %w", w.Namespace, w.Name, err)
	}
	jobs, err := view.AllAs[batchv1.Job](objs)
	if err != nil {
		return err
	}
	sort.Slice(jobs, func(i, j int) bool {
		return jobs[i].CreationTimestamp.After(jobs[j].CreationTimestamp.Time)
	})
	for _, j := range jobs {
		if !managed(j.Labels) || len(j.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		k := j.Spec.Template.Spec.Containers[0]
		w.PreloadImage = k.Image
		if len(k.Command) == 3 {
			for _, m := range pulling.FindAllStringSubmatch(k.Command[2], -1) {
				w.PreloadModels = append(w.PreloadModels, m[1])
			}
		}
		return nil
	}
	return nil
}
