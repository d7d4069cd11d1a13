package checks

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/internal/view/viewtest"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// The free-slice check reads every claim in the cluster (any may hold a
// gpuslice slice) — but only when a workload wants more pods than it runs:
// a plan of running workloads lists no claim, so its cost does not grow
// with other tenants' claims. When it counts, a slice another tenant's
// claim holds, in a namespace the configuration does not name, is not free.
func TestGatherReadsClaimsOnlyToCountFreeSlices(t *testing.T) {
	quarters := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: contract.DriverName, Pool: resourcev1.ResourcePool{Name: "n1", ResourceSliceCount: 1}, NodeName: ptr.To("n1")}}
	for i := range 4 {
		quarters.Spec.Devices = append(quarters.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("q%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				contract.AttrModel: {StringValue: ptr.To("Tesla V100-PCIE-32GB")}, contract.AttrFraction: {IntValue: ptr.To(int64(25))}}})
	}
	theirs := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "other-tenant"},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: contract.DriverName, Pool: "n1", Device: "q0"}}}}}}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ollama-1", Namespace: "team-a", Labels: map[string]string{objects.LabelWorkload: "ollama"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}

	for _, tc := range []struct {
		name       string
		objs       []runtime.Object
		readClaims bool
	}{
		{"wants a pod", []runtime.Object{quarters, theirs}, true},
		{"runs its pod", []runtime.Object{quarters, theirs, running}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, client := viewtest.New(t, tc.objs...)
			s := goodStack() // one workload of one replica in team-a
			f, err := Gather(context.Background(), v, s)
			if err != nil {
				t.Fatal(err)
			}
			listed := false
			for _, a := range client.Actions() {
				if a.GetResource().Resource == "resourceclaims" && (a.GetVerb() == "list" || a.GetVerb() == "watch") {
					listed = true
				}
			}
			if listed != tc.readClaims {
				t.Errorf("claims read: %v, want %v", listed, tc.readClaims)
			}
			free, counted := f.FreeSlices["v100-8gi"]
			if counted != tc.readClaims {
				t.Fatalf("free slices counted: %v (%v), want %v", counted, f.FreeSlices, tc.readClaims)
			}
			if counted && free != 3 {
				t.Errorf("%d free quarters, want 3: another tenant's claim holds one", free)
			}
		})
	}
}

// Gather reads a namespace's pods only for a workload that wants pods
// (what they hold offsets its charge), and its LimitRanges only where a
// quota limits what such a workload leaves unset (one may default it): a
// namespace of workloads scaled to zero costs neither.
func TestGatherReadsPodsAndLimitRangesOnlyWhereChecksUseThem(t *testing.T) {
	defaults := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: "team-a"}}
	for _, tc := range []struct {
		name              string
		change            func(w *spec.Workload)
		pods, limitRanges bool
	}{
		{"wants a pod, sets what the quota limits", nil, true, false},
		{"wants a pod, leaves cpu_limit to a LimitRange", func(w *spec.Workload) { w.Container.CPULimit = "" }, true, true},
		{"scaled to zero", func(w *spec.Workload) { w.Replicas, w.PreloadModels, w.Container.CPULimit = 0, nil, "" }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, client := viewtest.New(t, defaults)
			s := goodStack() // its quota limits limits.cpu
			if tc.change != nil {
				tc.change(s.Workloads[0])
			}
			f, err := Gather(context.Background(), v, s)
			if err != nil {
				t.Fatal(err)
			}
			read := map[string]bool{}
			for _, a := range client.Actions() {
				if a.GetVerb() == "list" || a.GetVerb() == "watch" {
					read[a.GetResource().Resource] = true
				}
			}
			if read["pods"] != tc.pods || read["limitranges"] != tc.limitRanges {
				t.Errorf("pods read: %v, limit ranges read: %v; want %v and %v", read["pods"], read["limitranges"], tc.pods, tc.limitRanges)
			}
			if f.LimitRanges["team-a"] != tc.limitRanges {
				t.Errorf("LimitRange of team-a known: %v, want %v", f.LimitRanges["team-a"], tc.limitRanges)
			}
		})
	}
}
