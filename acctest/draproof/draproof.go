// Package draproof walks the Kubernetes Dynamic Resource Allocation path that
// gpuslice builds on, step by step, against a real control plane: device
// classes with CEL selectors, a per-class device quota, an admission policy
// refusing raw nvidia.com/gpu requests, a partitionable GPU published as
// ResourceSlices, and the real scheduler allocating slices of it within its
// counters. The integration test asserts each step; `make demo` narrates it.
package draproof

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
)

// GPU is the simulated card the proof publishes: a V100-PCIE-32GB.
const (
	GPUModel  = "Tesla V100-PCIE-32GB"
	GPUMemory = "32Gi"
)

// RawGPUMessage is what the admission policy answers to a pod asking for
// nvidia.com/gpu.
const RawGPUMessage = "shared GPU capacity is offered through gpuslice packages: use a gpuslice workload or a claim of a gpuslice device class instead of nvidia.com/gpu"

// Proof holds where the proof runs. Namespace must carry the tenant label
// (contract.LabelTenant=true); Node must be a Ready node.
type Proof struct {
	Client    kubernetes.Interface
	Namespace string
	Node      string
	// Model is the GPU model published; empty means GPUModel.
	Model string
}

func (p *Proof) model() string {
	if p.Model != "" {
		return p.Model
	}
	return GPUModel
}

// ClassName returns the name of the proof's device class for a fraction.
func ClassName(fraction int) string { return fmt.Sprintf("proof-v100-%dpct", fraction) }

// CreateDeviceClasses creates one device class per fraction, each selecting
// the slices of that size by CEL.
func (p *Proof) CreateDeviceClasses(ctx context.Context, fractions ...int) ([]*resourcev1.DeviceClass, error) {
	var out []*resourcev1.DeviceClass
	for _, f := range fractions {
		cls, err := p.Client.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: ClassName(f)},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: render.Selector(GPUModel, f)},
			}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create device class %s: %w", ClassName(f), err)
		}
		out = append(out, cls)
	}
	return out, nil
}

// CreateQuota grants the namespace `devices` claims of each class and waits
// until the quota controller has computed its usage.
func (p *Proof) CreateQuota(ctx context.Context, devices map[string]int64) (*corev1.ResourceQuota, error) {
	hard := corev1.ResourceList{
		corev1.ResourceRequestsCPU:    resource.MustParse("4"),
		corev1.ResourceRequestsMemory: resource.MustParse("16Gi"),
	}
	for class, n := range devices {
		hard[render.DeviceQuotaResource(class)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	q, err := p.Client.CoreV1().ResourceQuotas(p.Namespace).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-slices"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create quota: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		q, err = p.Client.CoreV1().ResourceQuotas(p.Namespace).Get(ctx, q.Name, metav1.GetOptions{})
		return err == nil && len(q.Status.Hard) == len(hard), err
	})
	if err != nil {
		return nil, fmt.Errorf("quota controller did not compute usage of %s/%s: %w", p.Namespace, q.Name, err)
	}
	return q, nil
}

// InstallRawGPUPolicy installs a ValidatingAdmissionPolicy and its binding
// refusing pods that request nvidia.com/gpu in tenant namespaces.
func (p *Proof) InstallRawGPUPolicy(ctx context.Context) error {
	const name = "proof-no-raw-gpu"
	_, err := p.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: `object.spec.containers.all(c, !has(c.resources) ||
					((!has(c.resources.limits) || !("nvidia.com/gpu" in c.resources.limits)) &&
					 (!has(c.resources.requests) || !("nvidia.com/gpu" in c.resources.requests))))`,
				Message: RawGPUMessage,
				Reason:  ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create admission policy: %w", err)
	}
	_, err = p.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{contract.LabelTenant: "true"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create admission policy binding: %w", err)
	}
	return nil
}

// RawGPUPod returns a pod asking for one whole nvidia.com/gpu, the way a
// device-plugin user would.
func RawGPUPod(namespace string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "raw-gpu", Namespace: namespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "cuda", Image: "nvidia/cuda:12.4.1-base-ubuntu22.04",
			Resources: corev1.ResourceRequirements{
				// CPU and memory requests too, so the namespace's pooled quota
				// admits it and only the GPU request is at issue.
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
			},
		}}},
	}
}

// TryRawGPUPod submits RawGPUPod as a dry run in namespace and returns the
// API server's answer: nil when admitted. Policies take effect a moment
// after they are created, so a tenant namespace is retried until refused or
// 15 s pass.
func (p *Proof) TryRawGPUPod(ctx context.Context, namespace string, expectRefusal bool) error {
	var last error
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, last = p.Client.CoreV1().Pods(namespace).Create(ctx, RawGPUPod(namespace), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !expectRefusal || last != nil || time.Now().After(deadline) {
			return last
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// PublishGPU publishes one partitionable V100 on the proof's node the way
// the node plugin does: a CounterSet holding the GPU's memory and compute in
// one ResourceSlice, and in a second slice, for each fraction, 100/fraction
// devices consuming their share of those counters.
func (p *Proof) PublishGPU(ctx context.Context, fractions ...int) ([]*resourcev1.ResourceSlice, error) {
	return p.PublishGPUs(ctx, 1, fractions...)
}

// RunPod creates a claim template for class and a pod using it, then waits
// until the resourceclaim controller has created the pod's claim. It returns
// the claim's name.
func (p *Proof) RunPod(ctx context.Context, name, class string) (string, error) {
	_, err := p.Client.ResourceV1().ResourceClaimTemplates(p.Namespace).Create(ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.LabelPackage: class}},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: 1}}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create claim template %s: %w", name, err)
	}
	_, err = p.Client.CoreV1().Pods(p.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(name)}},
			Containers: []corev1.Container{{
				Name: "app", Image: "ollama/ollama:0.24.0",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("2Gi")},
					Claims:   []corev1.ResourceClaim{{Name: "gpu"}},
				},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create pod %s: %w", name, err)
	}
	var claim string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := p.Client.CoreV1().Pods(p.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.ResourceClaimName != nil {
				claim = *s.ResourceClaimName
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("resourceclaim controller did not create a claim for pod %s: %w", name, err)
	}
	return claim, nil
}

// Placement is where the scheduler put a pod and its claim.
type Placement struct {
	Node   string // empty while the pod is Pending
	Device string // allocated device, empty while the claim is unallocated
	// Reason is the scheduler's message while the pod cannot be placed.
	Reason string
}

// WaitPlacement waits until pod is bound (want bound) or the scheduler has
// marked it unschedulable (want !bound), and reports its placement.
func (p *Proof) WaitPlacement(ctx context.Context, pod, claim string, bound bool, timeout time.Duration) (Placement, error) {
	var pl Placement
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		po, err := p.Client.CoreV1().Pods(p.Namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cl, err := p.Client.ResourceV1().ResourceClaims(p.Namespace).Get(ctx, claim, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		pl = Placement{Node: po.Spec.NodeName}
		if cl != nil && cl.Status.Allocation != nil && len(cl.Status.Allocation.Devices.Results) > 0 {
			pl.Device = cl.Status.Allocation.Devices.Results[0].Device
		}
		for _, c := range po.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				pl.Reason = c.Message
			}
		}
		if bound {
			return pl.Node != "" && pl.Device != "", nil
		}
		return pl.Reason != "", nil
	})
	if err != nil {
		return pl, fmt.Errorf("pod %s/%s: %w (last seen: node %q, device %q, reason %q)", p.Namespace, pod, err, pl.Node, pl.Device, pl.Reason)
	}
	return pl, nil
}

// DeletePod deletes a pod at once: with no kubelet on the simulated node a
// graceful deletion would never complete.
func (p *Proof) DeletePod(ctx context.Context, name string) error {
	err := p.Client.CoreV1().Pods(p.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	return nil
}

// Unschedulable reports whether a scheduler message says the claims could
// not be allocated (as opposed to, say, a missing node).
func Unschedulable(reason string) bool {
	return strings.Contains(reason, "cannot allocate all claims")
}
