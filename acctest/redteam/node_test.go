package redteam

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// TestNodeWithoutAdmission asks for more than the package in a namespace
// the admission policies do not bind — as if the platform team had deleted
// them, or forgot a namespace's tenant label. The scheduler allocates what
// was asked; the node plugin must refuse to prepare it, so the pod never
// starts, and say why on the pod and the claim.
func TestNodeWithoutAdmission(t *testing.T) {
	s := setup(t)
	cases := []struct {
		name  string
		claim *resourcev1.ResourceClaim // nil: the pod asks by extended resource
		pod   *corev1.Pod
		want  string
	}{
		{"any-size claim asking twice its package", labelled(claim("open-any", 1, map[resourcev1.QualifiedName]resource.Quantity{
			contract.CapacityMemory: quantity("12Gi"), contract.CapacityCompute: quantity("40")}, pkgAnySize), pkgAnySize), nil, pkgAnySize},
		{"time-sliced claim asking the whole GPU", labelled(claim("open-shared", 1, map[resourcev1.QualifiedName]resource.Quantity{
			contract.CapacityShares: quantity("1M")}, pkgShared), pkgShared), nil, pkgShared},
		{"two quarters by extended resource", nil, extendedPod("open-extended", extQuarter, "2"), pkgQuarter},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := attack(t, "node plugin (prepare)", refused)
			r.detail = s.refusedAtPrepare(t, c.claim, c.pod, c.want)
			s.victimUntouched(t)
		})
	}
}

// refusedAtPrepare creates claim (if any) and a pod using it (or pod) in
// the namespace without admission, waits for the kubelet's prepare to
// fail, and checks that the container never started. It returns the
// reason the pod's event gives.
func (s *suite) refusedAtPrepare(t *testing.T, claim *resourcev1.ResourceClaim, pod *corev1.Pod, want string) string {
	t.Helper()
	ctx := context.Background()
	if claim != nil {
		if _, err := s.admin.ResourceV1().ResourceClaims(open).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = s.admin.ResourceV1().ResourceClaims(open).Delete(context.Background(), claim.Name, metav1.DeleteOptions{})
		})
		pod = attackPod(claim.Name, "", "slice-check")
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim.Name}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}
	if _, err := s.admin.CoreV1().Pods(open).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.deletePod(t, open, pod.Name) })
	var reason string
	realnodetest.Eventually(t, 2*time.Minute, "the node plugin to refuse the claim of pod "+pod.Name, func() (bool, string) {
		p, err := s.admin.CoreV1().Pods(open).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running != nil || c.State.Terminated != nil {
				t.Fatalf("the container of %s started: %+v", pod.Name, c.State)
			}
		}
		events, err := s.admin.CoreV1().Events(open).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == "FailedPrepareDynamicResources" && strings.Contains(e.Message, want) {
				reason = e.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s; events %q", p.Status.Phase, seen)
	})
	return reason
}
