package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// LabelPreloadFor marks a preload Job and its pod with the workload whose
// models it pulls.
const LabelPreloadFor = "gpuslice.dev/preload-for"

// ClaimName is the name of the claim inside a workload's pod spec.
const ClaimName = "gpu"

// ClaimTemplateName names a workload's ResourceClaimTemplate. The package is
// part of the name: claim templates are immutable, so moving a workload to
// another package creates a new template and prunes the old one instead of
// deleting the one running pods came from.
// A pod's device count is part of it for the same reason; one device keeps
// the name it always had, so existing stacks do not replace their template.
// An any-size or time-sliced package's amounts are part of it too (a short
// hash of them): a change of the package's size makes a new template.
func ClaimTemplateName(w *spec.Workload, pkg *spec.Package) string {
	name := w.Name + "-" + w.Package
	if n := w.DevicesPerPod(); n > 1 {
		name = fmt.Sprintf("%s-x%d", name, n)
	}
	if requests := CapacityRequests(pkg); len(requests) > 0 {
		h := sha256.New()
		for _, k := range slices.Sorted(maps.Keys(requests)) {
			q := requests[k]
			fmt.Fprintf(h, "%s=%s\n", k, q.String())
		}
		name += "-" + hex.EncodeToString(h.Sum(nil))[:6]
	}
	return name
}

// packageOf is the stack's package named name, nil when the stack lacks it.
func (r renderer) packageOf(name string) *spec.Package {
	for _, p := range r.stack.Packages {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// VolumeName names a workload's model volume (per replica for a
// StatefulSet: <VolumeName>-<name>-<ordinal>).
func VolumeName(w *spec.Workload) string { return w.Name + "-models" }

// PreloadJobName names the Job that pulls a workload's models. It carries a
// hash of what the Job does, because a Job's pod template is immutable: a
// change of models makes a new Job and prunes the old one.
func PreloadJobName(w *spec.Workload) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%d\n", strings.Join(w.PreloadModels, "\n"), w.PreloadImage, w.Expose.Port)
	return w.Name + "-preload-" + hex.EncodeToString(h.Sum(nil))[:8]
}

// PodLabels are the labels a workload's pods carry; WorkloadSelector picks
// them out.
func PodLabels(w *spec.Workload) map[string]string {
	l := map[string]string{}
	maps.Copy(l, w.Labels)
	l["app.kubernetes.io/name"] = w.Name
	l[objects.LabelWorkload] = w.Name
	l[contract.LabelPackage] = w.Package
	return l
}

// WorkloadSelector selects a workload's pods.
func WorkloadSelector(w *spec.Workload) map[string]string {
	return map[string]string{objects.LabelWorkload: w.Name}
}

// workload renders a workload's objects, in the order they are applied:
// its claim template, its model volume, what runs its pods, their Service
// and the preload Job.
func (r renderer) workload(w *spec.Workload) ([]objects.Object, error) {
	workloadLabels := map[string]string{"app.kubernetes.io/name": w.Name, objects.LabelWorkload: w.Name}
	out := appendObject(nil, w.Address, r.claimTemplate(w), "resource.k8s.io/v1", "ResourceClaimTemplate")
	if w.ModelVolume != nil && w.Kind != spec.KindStatefulSet {
		out = appendObject(out, w.Address, r.modelVolume(w, workloadLabels), "v1", "PersistentVolumeClaim")
	}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: PodLabels(w), Annotations: podAnnotations(w)}, Spec: r.podSpec(w)}
	out, err := r.controller(out, w, template, workloadLabels)
	if err != nil {
		return nil, err
	}
	if w.Expose != nil {
		out = appendObject(out, w.Address, r.exposeService(w, workloadLabels), "v1", "Service")
	}
	if len(w.PreloadModels) > 0 {
		out = appendObject(out, w.Address, r.preloadJob(w), "batch/v1", "Job")
	}
	return out, nil
}

// claimTemplate is the ResourceClaimTemplate each of the workload's pods
// claims its slices by.
func (r renderer) claimTemplate(w *spec.Workload) *resourcev1.ResourceClaimTemplate {
	claimLabels := map[string]string{objects.LabelWorkload: w.Name, contract.LabelPackage: w.Package}
	pkg := r.packageOf(w.Package)
	exactly := &resourcev1.ExactDeviceRequest{DeviceClassName: w.Package, Count: int64(w.DevicesPerPod())}
	if requests := CapacityRequests(pkg); len(requests) > 0 {
		exactly.Capacity = &resourcev1.CapacityRequirements{Requests: requests}
	}
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: r.meta(w.Address, w.Namespace, ClaimTemplateName(w, pkg), claimLabels),
		Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: claimLabels},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: ClaimName, Exactly: exactly}},
			}},
		},
	}
}

// modelVolume is the PersistentVolumeClaim of a workload's model volume,
// for the kinds whose controller makes none.
func (r renderer) modelVolume(w *spec.Workload, workloadLabels map[string]string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: r.meta(w.Address, w.Namespace, VolumeName(w), workloadLabels),
		Spec:       r.volumeSpec(w.ModelVolume),
	}
	if w.ModelVolume.DeleteOnDestroy {
		pvc.Annotations[objects.AnnotationOnDestroy] = "delete"
	}
	return pvc
}

// controller appends what runs the workload's pods (its Deployment,
// StatefulSet or Job, with what a Job needs beside it) and its autoscaler.
func (r renderer) controller(out []objects.Object, w *spec.Workload, template corev1.PodTemplateSpec, workloadLabels map[string]string) ([]objects.Object, error) {
	selector := &metav1.LabelSelector{MatchLabels: WorkloadSelector(w)}
	var workload runtime.Object
	var apiVersion, kind string
	switch w.Kind {
	case spec.KindDeployment:
		apiVersion, kind = "apps/v1", "Deployment"
		workload = r.deployment(w, template, selector, workloadLabels)
	case spec.KindStatefulSet:
		apiVersion, kind = "apps/v1", "StatefulSet"
		workload = r.statefulSet(w, template, selector, workloadLabels)
	case spec.KindJob:
		apiVersion, kind = "batch/v1", "Job"
		var err error
		if out, workload, err = r.job(out, w, template, workloadLabels); err != nil {
			return nil, err
		}
	}
	if workload == nil { // a PyTorchJob or TrainJob, which job appended
		return out, nil
	}
	if w.Autoscaled() {
		// Plan and apply leave the replica count to the autoscaler.
		workload.(metav1.Object).GetAnnotations()[objects.AnnotationAutoscaledBy] = autoscaledBy(w)
	}
	out = appendObject(out, w.Address, workload, apiVersion, kind)
	hpa, err := r.autoscaler(w, apiVersion, kind)
	if err != nil {
		return nil, err
	}
	return append(out, hpa...), nil
}

func (r renderer) deployment(w *spec.Workload, template corev1.PodTemplateSpec, selector *metav1.LabelSelector, workloadLabels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: r.meta(w.Address, w.Namespace, w.Name, workloadLabels),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(w.InitialReplicas()),
			Selector: selector,
			Template: template,
			// No surge: a surge pod would need a slice more than the
			// quota grants and wait for it forever.
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				},
			},
		},
	}
}

// statefulSet is a StatefulSet workload's, which makes the model volume of
// each of its pods.
func (r renderer) statefulSet(w *spec.Workload, template corev1.PodTemplateSpec, selector *metav1.LabelSelector, workloadLabels map[string]string) *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{
		ObjectMeta: r.meta(w.Address, w.Namespace, w.Name, workloadLabels),
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(w.InitialReplicas()), Selector: selector, Template: template, ServiceName: w.Name,
		},
	}
	if w.ModelVolume != nil {
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: VolumeName(w), Labels: workloadLabels},
			Spec:       r.volumeSpec(w.ModelVolume),
		}}
		// The StatefulSet's own volumes outlive it unless asked
		// (Kubernetes' default retention policy keeps them).
		if w.ModelVolume.DeleteOnDestroy {
			sts.Spec.VolumeClaimTemplates[0].Annotations = map[string]string{objects.AnnotationOnDestroy: "delete"}
			sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
		}
	}
	return sts
}

// job appends what a Job workload needs beside its Job (a distributed
// Job's headless Service) and returns the Job; a PyTorchJob or TrainJob
// it appends whole, and returns no Job.
func (r renderer) job(out []objects.Object, w *spec.Workload, template corev1.PodTemplateSpec, workloadLabels map[string]string) ([]objects.Object, runtime.Object, error) {
	switch {
	case w.PyTorchJob():
		// The operator makes the pods' Service: no headless one here.
		o, err := r.pyTorchJob(w, template)
		if err != nil {
			return nil, nil, err
		}
		return append(out, o), nil, nil
	case w.TrainJob():
		// Trainer makes the pods' Service: no headless one here.
		objs, err := r.trainJob(w, template)
		if err != nil {
			return nil, nil, err
		}
		return append(out, objs...), nil, nil
	case w.Distributed():
		job, svc := r.training(w, template)
		out := appendObject(out, w.Address, svc, "v1", "Service")
		return out, job, nil
	}
	template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	return out, &batchv1.Job{
		ObjectMeta: r.meta(w.Address, w.Namespace, w.Name, workloadLabels),
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(w.Replicas), Completions: ptr.To(w.Replicas),
			BackoffLimit: ptr.To[int32](3), Template: template,
		},
	}, nil
}

// exposeService is the Service that exposes a workload's pods.
func (r renderer) exposeService(w *spec.Workload, workloadLabels map[string]string) *corev1.Service {
	target := w.Expose.TargetPort
	if target == 0 {
		target = w.Expose.Port
	}
	return &corev1.Service{
		ObjectMeta: r.meta(w.Address, w.Namespace, w.Name, workloadLabels),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceType(w.Expose.Type),
			Selector: WorkloadSelector(w),
			Ports: []corev1.ServicePort{{
				Name: "http", Port: w.Expose.Port, TargetPort: intstr.FromInt32(target), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

func (r renderer) podSpec(w *spec.Workload) corev1.PodSpec {
	c := w.Container
	container := corev1.Container{
		Name:            w.Name,
		Image:           c.Image,
		ImagePullPolicy: corev1.PullPolicy(c.ImagePullPolicy),
		Command:         c.Command,
		Args:            c.Args,
		Resources: corev1.ResourceRequirements{
			Requests: quantities(map[corev1.ResourceName]string{corev1.ResourceCPU: c.CPURequest, corev1.ResourceMemory: c.MemoryRequest}),
			Limits:   quantities(map[corev1.ResourceName]string{corev1.ResourceCPU: c.CPULimit, corev1.ResourceMemory: c.MemoryLimit}),
			Claims:   []corev1.ResourceClaim{{Name: ClaimName}},
		},
		ReadinessProbe: probe(c.ReadinessProbe),
		LivenessProbe:  probe(c.LivenessProbe),
	}
	for _, name := range slices.Sorted(maps.Keys(c.Env)) {
		container.Env = append(container.Env, corev1.EnvVar{Name: name, Value: c.Env[name]})
	}
	for _, p := range c.Ports {
		container.Ports = append(container.Ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort, Protocol: corev1.Protocol(p.Protocol)})
	}
	pod := corev1.PodSpec{
		// Service links would inject <SERVICE>_PORT variables that runtimes
		// such as Ollama misread as their own settings.
		EnableServiceLinks: ptr.To(false),
		ResourceClaims: []corev1.PodResourceClaim{{
			Name: ClaimName, ResourceClaimTemplateName: ptr.To(ClaimTemplateName(w, r.packageOf(w.Package))),
		}},
	}
	if w.ModelVolume != nil {
		container.VolumeMounts = []corev1.VolumeMount{{Name: "models", MountPath: w.ModelVolume.MountPath}}
		if w.Kind != spec.KindStatefulSet {
			pod.Volumes = []corev1.Volume{{Name: "models", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: VolumeName(w)},
			}}}
		} else {
			container.VolumeMounts[0].Name = VolumeName(w)
		}
	}
	pod.Containers = []corev1.Container{container}
	return pod
}

func (r renderer) volumeSpec(v *spec.ModelVolume) corev1.PersistentVolumeClaimSpec {
	s := corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.PersistentVolumeAccessMode(v.AccessMode)},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(v.Size)}},
	}
	if v.StorageClass != "" {
		s.StorageClassName = ptr.To(v.StorageClass)
	}
	return s
}

// preloadJob pulls the workload's models over the runtime's HTTP API once
// the runtime answers: tenants cannot `kubectl exec` into it, and a Job
// that waits for the Service is correct whenever it starts.
func (r renderer) preloadJob(w *spec.Workload) *batchv1.Job {
	base := "http://" + w.ServiceAddress()
	var script strings.Builder
	// The runtime's in-cluster address is set once and read by each call.
	fmt.Fprintf(&script, "set -eu\nruntime=%s\nuntil curl -fsS \"$runtime/api/version\" >/dev/null; do echo waiting for $runtime; sleep 5; done\n", base)
	for _, m := range w.PreloadModels {
		fmt.Fprintf(&script, "echo pulling %s\ncurl -fsS \"$runtime/api/pull\" -d '{\"model\":\"%s\",\"stream\":false}'\necho\n", m, m)
	}
	// Not the workload label: the workload's selectors and status must not
	// count the preload pod as one of its replicas.
	labels := map[string]string{LabelPreloadFor: w.Name, "app.kubernetes.io/component": "preload"}
	return &batchv1.Job{
		ObjectMeta: r.meta(w.Address, w.Namespace, PreloadJobName(w), labels),
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](6),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyOnFailure,
					EnableServiceLinks: ptr.To(false),
					Containers: []corev1.Container{{
						Name: "preload", Image: w.PreloadImage,
						Command:   []string{"sh", "-c", script.String()},
						Resources: PreloadResources(),
					}},
				},
			},
		},
	}
}

// PreloadResources are the preload Job's requests and limits. A namespace
// quota on CPU and memory refuses pods without requests; pulling needs little
// of either. The quota check counts them too.
func PreloadResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
}

func probe(p *spec.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	out := &corev1.Probe{
		InitialDelaySeconds: p.InitialDelaySeconds, PeriodSeconds: p.PeriodSeconds,
		TimeoutSeconds: p.TimeoutSeconds, FailureThreshold: p.FailureThreshold,
	}
	switch {
	case p.HTTPPath != "":
		out.HTTPGet = &corev1.HTTPGetAction{Path: p.HTTPPath, Port: intstr.FromInt32(p.Port)}
	case len(p.Command) > 0:
		out.Exec = &corev1.ExecAction{Command: p.Command}
	default:
		out.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(p.Port)}
	}
	return out
}

func quantities(in map[corev1.ResourceName]string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, v := range in {
		if v != "" {
			out[name] = resource.MustParse(v) // validated
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
