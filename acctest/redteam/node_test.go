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
// starts, say why on the pod and the claim, and leave the claim beside it
// on the same GPU as it was.
func TestNodeWithoutAdmission(t *testing.T) {
	s := setup(t)
	// Neighbours of each shared kind, each alone on one of the shared
	// node's GPUs (a GPU serves one kind at a time), so each attack below
	// can only land beside its neighbour.
	anyNeighbour := s.neighbour(t, "any-neighbour", pkgAnySize, anySize("6Gi", "20"))
	sharedNeighbour := s.neighbour(t, "shared-neighbour", pkgShared, shares("250000"))
	cases := []struct {
		name      string
		claim     *resourcev1.ResourceClaim // nil: the pod asks by extended resource
		pod       *corev1.Pod
		want      string
		neighbour *holder
	}{
		{"any-size claim asking twice its package", labelled(claim("open-any", 1, anySize("12Gi", "40"), pkgAnySize), pkgAnySize), nil,
			"asks for package " + pkgAnySize, anyNeighbour},
		{"time-sliced claim asking twice its shares", labelled(claim("open-shared", 1, shares("500000"), pkgShared), pkgShared), nil,
			"asks for package " + pkgShared, sharedNeighbour},
		{"two quarters by extended resource", nil, onNode(extendedPod("open-extended", extQuarter, "2"), partitionNode),
			"asks for package " + pkgQuarter, s.victim},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := attack(t, "node plugin (prepare)", refused)
			r.detail = s.refusedAtPrepare(t, c.claim, c.pod, c.want)
			s.untouched(t, c.neighbour)
		})
	}
}

func anySize(memory, compute string) map[resourcev1.QualifiedName]resource.Quantity {
	return map[resourcev1.QualifiedName]resource.Quantity{contract.CapacityMemory: quantity(memory), contract.CapacityCompute: quantity(compute)}
}

func shares(n string) map[resourcev1.QualifiedName]resource.Quantity {
	return map[resourcev1.QualifiedName]resource.Quantity{contract.CapacityShares: quantity(n)}
}

func onNode(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	return p
}

// neighbour runs a pod holding 4 GiB of a claim of pkg, exactly the
// package, on the shared node in the namespace without admission.
func (s *suite) neighbour(t *testing.T, name, pkg string, capacity map[resourcev1.QualifiedName]resource.Quantity) *holder {
	t.Helper()
	ctx := context.Background()
	c := labelled(claim(name, 1, capacity, pkg), pkg)
	if _, err := s.admin.ResourceV1().ResourceClaims(open).Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.admin.ResourceV1().ResourceClaims(open).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	pod := onNode(claimPod(attackPod(name, "", ""), name), sharedNode)
	pod.Spec.Containers[0].Command = []string{"slice-check", "--hold", "4096"}
	if _, err := s.admin.CoreV1().Pods(open).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.deletePod(t, open, name) })
	h, err := s.holding(open, name, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// claimPod gives p's container the claim named claim.
func claimPod(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return p
}

// refusedAtPrepare creates claim (if any) and a pod using it on the shared
// node (or pod) in the namespace without admission, waits for the
// kubelet's prepare to fail, and checks that the container never started
// and that the claim says why. It returns the reason the pod's event gives.
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
		pod = onNode(claimPod(attackPod(claim.Name, "", "slice-check"), claim.Name), sharedNode)
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
				reason = e.Message[strings.Index(e.Message, want):]
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s; events %q", p.Status.Phase, seen)
	})
	// The tenant reads the same reason on its claim.
	p, err := s.admin.CoreV1().Pods(open).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || claimOf(p) == "" {
		t.Fatalf("the claim of pod %s: %v", pod.Name, err)
	}
	name := claimOf(p)
	realnodetest.Eventually(t, time.Minute, "the refusal on claim "+name, func() (bool, string) {
		c, err := s.admin.ResourceV1().ResourceClaims(open).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range c.Status.Devices {
			for _, cond := range d.Conditions {
				if cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, want) {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%+v", c.Status.Devices)
	})
	return reason
}
