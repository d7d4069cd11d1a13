package readback

import (
	"context"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Workload reads the gpuslice_workload ns/name from its Deployment,
// StatefulSet or Job, volume, Service and preload Job; nil when it is not
// applied. wait_for and timeout, which only apply uses, and the model
// block come from prior (else their defaults).
func Workload(ctx context.Context, c kubernetes.Interface, ns, name string, prior *spec.Workload) (*spec.Workload, error) {
	if prior == nil {
		prior = &spec.Workload{WaitFor: spec.WaitReady, Timeout: "10m"}
	}
	// The model block only feeds plan-time checks; nothing in the cluster
	// records it.
	w := &spec.Workload{Namespace: ns, Name: name, WaitFor: prior.WaitFor, Timeout: prior.Timeout, PreloadImage: prior.PreloadImage, Model: prior.Model}
	if w.PreloadImage == "" {
		w.PreloadImage = defaultPreloadImage
	}
	var template corev1.PodTemplateSpec
	var claimTemplates []corev1.PersistentVolumeClaim
	found := false
	if d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && managed(d.Labels) {
		w.Kind, template, found = spec.KindDeployment, d.Spec.Template, true
		w.Replicas = deref(d.Spec.Replicas, 1)
	} else if err != nil && notFound(err, "") != nil {
		return nil, notFound(err, "Deployment "+ns+"/"+name)
	}
	if !found {
		if s, err := c.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && managed(s.Labels) {
			w.Kind, template, found = spec.KindStatefulSet, s.Spec.Template, true
			w.Replicas = deref(s.Spec.Replicas, 1)
			claimTemplates = s.Spec.VolumeClaimTemplates
		} else if err != nil && notFound(err, "") != nil {
			return nil, notFound(err, "StatefulSet "+ns+"/"+name)
		}
	}
	if !found {
		if j, err := c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && managed(j.Labels) {
			w.Kind, template, found = spec.KindJob, j.Spec.Template, true
			w.Replicas = deref(j.Spec.Parallelism, 1)
		} else if err != nil && notFound(err, "") != nil {
			return nil, notFound(err, "Job "+ns+"/"+name)
		}
	}
	if !found || len(template.Spec.Containers) == 0 {
		return nil, nil
	}
	w.Package = template.Labels[contract.LabelPackage]
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
	container := template.Spec.Containers[0]
	w.Container = readContainer(container, &prior.Container)

	if err := readVolume(ctx, c, w, container, claimTemplates, prior.ModelVolume); err != nil {
		return nil, err
	}
	if err := readService(ctx, c, w, prior.Expose); err != nil {
		return nil, err
	}
	if err := readPreload(ctx, c, w); err != nil {
		return nil, err
	}
	return w, nil
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

func readVolume(ctx context.Context, c kubernetes.Interface, w *spec.Workload, k corev1.Container, claimTemplates []corev1.PersistentVolumeClaim, prior *spec.ModelVolume) error {
	if len(k.VolumeMounts) == 0 {
		return nil
	}
	var pvcSpec *corev1.PersistentVolumeClaimSpec
	if w.Kind == spec.KindStatefulSet {
		for i := range claimTemplates {
			if claimTemplates[i].Name == render.VolumeName(w) {
				pvcSpec = &claimTemplates[i].Spec
			}
		}
	} else {
		pvc, err := c.CoreV1().PersistentVolumeClaims(w.Namespace).Get(ctx, render.VolumeName(w), metav1.GetOptions{})
		if err != nil {
			return notFound(err, "PersistentVolumeClaim "+w.Namespace+"/"+render.VolumeName(w))
		}
		pvcSpec = &pvc.Spec
	}
	if pvcSpec == nil {
		return nil
	}
	if prior == nil {
		prior = &spec.ModelVolume{}
	}
	mv := &spec.ModelVolume{MountPath: k.VolumeMounts[0].MountPath, AccessMode: "ReadWriteOnce"}
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

func readService(ctx context.Context, c kubernetes.Interface, w *spec.Workload, prior *spec.Expose) error {
	svc, err := c.CoreV1().Services(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return notFound(err, "Service "+w.Namespace+"/"+w.Name)
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

func readPreload(ctx context.Context, c kubernetes.Interface, w *spec.Workload) error {
	jobs, err := c.BatchV1().Jobs(w.Namespace).List(ctx, metav1.ListOptions{LabelSelector: render.LabelPreloadFor + "=" + w.Name})
	if err != nil {
		return notFound(err, "preload Jobs of "+w.Namespace+"/"+w.Name)
	}
	sort.Slice(jobs.Items, func(i, j int) bool {
		return jobs.Items[i].CreationTimestamp.After(jobs.Items[j].CreationTimestamp.Time)
	})
	for _, j := range jobs.Items {
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
