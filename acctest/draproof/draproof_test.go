package draproof_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

func TestMain(m *testing.M) {
	os.Exit(clustertest.Main(m, cluster.Options{}, nil))
}

// TestDRAPath is one story in order: each step builds on the one before.
func TestDRAPath(t *testing.T) {
	c := clustertest.Shared(t)
	ctx := context.Background()
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: "gpu-node-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.CreateNamespace(ctx, c.Client(), "team-a", map[string]string{contract.LabelTenant: "true"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.CreateNamespace(ctx, c.Client(), "ops", nil); err != nil {
		t.Fatal(err)
	}
	p := &draproof.Proof{Client: c.Client(), Namespace: "team-a", Node: "gpu-node-1"}
	half, whole := draproof.ClassName(50), draproof.ClassName(100)

	t.Run("device class with a CEL selector", func(t *testing.T) {
		classes, err := p.CreateDeviceClasses(ctx, 25, 50, 100)
		if err != nil {
			t.Fatal(err)
		}
		got := classes[1].Spec.Selectors[0].CEL.Expression
		if want := `device.attributes["gpuslice.dev"].fraction == 50`; !strings.Contains(got, want) {
			t.Errorf("stored selector %q lacks %q", got, want)
		}
		// The API server compiles the CEL: a broken selector is refused.
		_, err = c.Client().ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: "broken"},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver ==`},
			}}},
		}, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "compilation failed") {
			t.Errorf("broken CEL selector: err = %v, want a compilation error", err)
		}
	})

	t.Run("quota counts devices per class", func(t *testing.T) {
		q, err := p.CreateQuota(ctx, map[string]int64{half: 1, whole: 1})
		if err != nil {
			t.Fatal(err)
		}
		key := render.DeviceQuotaResource(half)
		if got := q.Status.Hard[key]; got.Value() != 1 {
			t.Errorf("quota hard %s = %s, want 1", key, got.String())
		}
		if got, ok := q.Status.Used[key]; !ok || got.Value() != 0 {
			t.Errorf("quota used %s = %v (present %v), want 0", key, got.String(), ok)
		}
	})

	t.Run("admission policy refuses nvidia.com/gpu in tenant namespaces only", func(t *testing.T) {
		if err := p.InstallRawGPUPolicy(ctx); err != nil {
			t.Fatal(err)
		}
		err := p.TryRawGPUPod(ctx, "team-a", true)
		if err == nil || !strings.Contains(err.Error(), draproof.RawGPUMessage) {
			t.Fatalf("raw GPU pod in tenant namespace: err = %v, want the policy's message", err)
		}
		if err := p.TryRawGPUPod(ctx, "ops", false); err != nil {
			t.Fatalf("raw GPU pod in a non-tenant namespace was refused: %v", err)
		}
	})

	var firstClaim string
	t.Run("scheduler allocates a slice and binds the pod", func(t *testing.T) {
		if _, err := p.PublishGPU(ctx, 25, 50, 100); err != nil {
			t.Fatal(err)
		}
		var err error
		firstClaim, err = p.RunPod(ctx, "first", half)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := p.WaitPlacement(ctx, "first", firstClaim, true, 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Node != "gpu-node-1" || !strings.HasPrefix(pl.Device, "gpu-0-50pct-") {
			t.Fatalf("placement = %+v, want a 50%% device on gpu-node-1", pl)
		}
		q, err := c.Client().CoreV1().ResourceQuotas("team-a").Get(ctx, "gpu-slices", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if used := q.Status.Used[render.DeviceQuotaResource(half)]; used.Value() != 1 {
			t.Errorf("quota used for %s = %s after one claim, want 1", half, used.String())
		}
	})

	var secondClaim string
	t.Run("a slice that would exceed the GPU's counters stays unallocated", func(t *testing.T) {
		var err error
		secondClaim, err = p.RunPod(ctx, "second", whole)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := p.WaitPlacement(ctx, "second", secondClaim, false, 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Node != "" || pl.Device != "" || !draproof.Unschedulable(pl.Reason) {
			t.Fatalf("placement = %+v, want Pending with an allocation failure", pl)
		}
		pod, err := c.Client().CoreV1().Pods("team-a").Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase != corev1.PodPending {
			t.Errorf("pod phase = %s, want Pending", pod.Status.Phase)
		}
	})

	t.Run("the waiting pod is placed once the slice frees", func(t *testing.T) {
		if err := p.DeletePod(ctx, "first"); err != nil {
			t.Fatal(err)
		}
		pl, err := p.WaitPlacement(ctx, "second", secondClaim, true, 90*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Device != "gpu-0-100pct-1" {
			t.Fatalf("placement = %+v, want the whole-GPU device", pl)
		}
	})
}
