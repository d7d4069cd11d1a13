package redteam

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/images"
)

// forged dresses a claim as the scheduler's claim for a pod's extended
// resources: the annotation and a controlling Pod owner, both fields the
// tenant writes.
func forged(c *resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
	c.Annotations = map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "mine", UID: types.UID("6d1f4a8e-0000-4000-8000-000000000001"), Controller: ptr.To(true)}}
	return c
}

// claim is a ResourceClaim with one request per class, each with count and
// capacity as given (nil: none), and no package label.
func claim(name string, count int64, capacity map[resourcev1.QualifiedName]resource.Quantity, classes ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i, class := range classes {
		r := resourcev1.DeviceRequest{Name: "container-0-request-" + string(rune('0'+i)), Exactly: &resourcev1.ExactDeviceRequest{
			DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}}
		if capacity != nil {
			r.Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: capacity}
		}
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, r)
	}
	return c
}

func labelled(c *resourcev1.ResourceClaim, pkg string) *resourcev1.ResourceClaim {
	c.Labels = map[string]string{contract.LabelPackage: pkg}
	return c
}

// extendedPod asks for n of an extended resource in its container.
func extendedPod(name string, res corev1.ResourceName, n string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "app", Image: images.SliceCheck,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{res: resource.MustParse(n)},
			},
		}}},
	}
}

func quantity(s string) resource.Quantity { return resource.MustParse(s) }

// TestAdmission attacks the admission policies from red's namespace as its
// tenant user alice: claims that pose as the scheduler's, claims and pods
// that ask more than the package or another tenant's package, and pods
// that reach for the GPU around the slice.
func TestAdmission(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	twiceAnySize := map[resourcev1.QualifiedName]resource.Quantity{contract.CapacityMemory: quantity("12Gi"), contract.CapacityCompute: quantity("40")}
	claims := []struct {
		name  string
		claim *resourcev1.ResourceClaim
		want  string
	}{
		// Every rule that had a waiver for the scheduler's claims, forged,
		// each claim otherwise in order so that only that rule can refuse it.
		{"forged scheduler claim: twice an any-size slice", forged(labelled(claim("forged-capacity", 1, twiceAnySize, pkgAnySize), pkgAnySize)), "capacity"},
		{"forged scheduler claim: all of a time-sliced GPU", forged(labelled(claim("forged-shares", 1, map[resourcev1.QualifiedName]resource.Quantity{contract.CapacityShares: quantity("1M")}, pkgShared), pkgShared)), "capacity"},
		{"forged scheduler claim: two quarters", forged(labelled(claim("forged-count", 2, nil, pkgQuarter), pkgQuarter)), "count"},
		{"forged scheduler claim: two requests", forged(labelled(claim("forged-requests", 1, nil, pkgQuarter, pkgQuarter), pkgQuarter)), "requests"},
		{"forged scheduler claim: no package label", forged(claim("forged-label", 1, nil, pkgQuarter)), contract.LabelPackage},
		// The same rules, from the tenant without forging anything.
		{"claim: twice an any-size slice", labelled(claim("capacity", 1, twiceAnySize, pkgAnySize), pkgAnySize), "but a slice of package " + pkgAnySize + " is exactly"},
		{"claim: two quarters", labelled(claim("count", 2, nil, pkgQuarter), pkgQuarter), "2 devices of " + pkgQuarter},
		{"claim: another tenant's package", labelled(claim("foreign", 1, nil, pkgVictim), pkgVictim), "deviceClassName " + pkgVictim + " is not granted to namespace " + red},
	}
	for _, c := range claims {
		t.Run(c.name, func(t *testing.T) {
			r := attack(t, "admission", refused)
			_, err := s.alice.ResourceV1().ResourceClaims(red).Create(ctx, c.claim, metav1.CreateOptions{})
			if err == nil {
				// admitted: out of the quota the next attacks need
				t.Cleanup(func() {
					_ = s.admin.ResourceV1().ResourceClaims(red).Delete(context.Background(), c.claim.Name, metav1.DeleteOptions{})
				})
			}
			r.detail = policyRefusal(t, err, c.want)
		})
	}

	pods := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"pod: a time-sliced GPU by its implicit extended resource", extendedPod("implicit-shared", implicitExt+pkgShared, "1"), pkgShared},
		{"pod: an any-size slice by its implicit extended resource", extendedPod("implicit-any", implicitExt+pkgAnySize, "1"), pkgAnySize},
		{"pod: two quarters by the extended resource", extendedPod("explicit-two", extQuarter, "2"), extQuarter},
		{"pod: two quarters by the implicit extended resource", extendedPod("implicit-two", implicitExt+pkgQuarter, "2"), pkgQuarter},
		{"pod: two MIG instances by the implicit extended resource", extendedPod("implicit-mig-two", implicitExt+pkgMIG, "2"), pkgMIG},
		{"pod: another tenant's package by extended resource", extendedPod("implicit-foreign", implicitExt+pkgVictim, "1"), pkgVictim},
		{"pod: raw nvidia.com/gpu", extendedPod("raw-gpu", "nvidia.com/gpu", "1"), "shared GPU capacity is offered through gpuslice packages"},
		{"pod: privileged", privileged(attackPod("privileged", "", "true")), "is privileged"},
		{"pod: host path to /dev/nvidia0", hostPath(attackPod("host-dev", "", "true"), "/dev/nvidia0"), "hostPath volume"},
		{"pod: its own memory limit variable", withEnv(attackPod("env-limit", "", "true"), contract.EnvMemoryLimit, "34359738368"), "sets " + contract.EnvMemoryLimit},
		{"pod: a volume over /run/gpuslice", overAccounting(attackPod("shadow", "", "true")), "mounts a volume at /run/gpuslice"},
	}
	for _, c := range pods {
		t.Run(c.name, func(t *testing.T) {
			r := attack(t, "admission", refused)
			_, err := s.alice.CoreV1().Pods(red).Create(ctx, c.pod, metav1.CreateOptions{})
			if err == nil {
				t.Cleanup(func() { s.deletePod(t, red, c.pod.Name) })
			}
			r.detail = policyRefusal(t, err, c.want)
		})
	}
	s.victimUntouched(t)
}

func privileged(p *corev1.Pod) *corev1.Pod {
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	return p
}

func hostPath(p *corev1.Pod, path string) *corev1.Pod {
	p.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
	return p
}

func withEnv(p *corev1.Pod, name, value string) *corev1.Pod {
	p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: name, Value: value})
	return p
}

func overAccounting(p *corev1.Pod) *corev1.Pod {
	p.Spec.Volumes = []corev1.Volume{{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: contract.ContainerAccountingDir}}
	return p
}
