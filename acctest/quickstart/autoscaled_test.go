package quickstart

import (
	"context"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/acctest/internal/tofutest"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/hostpath"
)

// TestAutoscaledInferenceWithOpenTofu applies examples/autoscaled-inference,
// scales it to 3 through the scale subresource as the HorizontalPodAutoscaler
// would, and checks that tofu then plans nothing and a second apply leaves
// the autoscaler's count alone.
func TestAutoscaledInferenceWithOpenTofu(t *testing.T) {
	c := clustertest.Shared(t)
	ctx := context.Background()
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: "serve-node"}); err != nil {
		t.Fatal(err)
	}
	gpu := &draproof.Proof{Client: c.Client(), Node: "serve-node", Model: "Tesla V100-PCIE-32GB"}
	if _, err := gpu.PublishGPU(ctx, 25); err != nil {
		t.Fatal(err)
	}
	// Each replica's model volume, provisioned as `gpuslice dev up` does.
	storage, stopStorage := context.WithCancel(ctx)
	t.Cleanup(stopStorage)
	if err := hostpath.Start(storage, c.Client(), t.TempDir()); err != nil {
		t.Fatal(err)
	}

	run := tofutest.In(t, tofutest.Example(t, "autoscaled-inference"), tofuEnv(t, c))

	if out, code := run("init", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("tofu init from the mirror: exit %d\n%s", code, out)
	}
	if out, code := run("apply", "-auto-approve", "-input=false", "-no-color"); code != 0 || !strings.Contains(out, "Apply complete! Resources: 3 added") {
		t.Fatalf("tofu apply: exit %d\n%s", code, out)
	}
	hpa, err := c.Client().AutoscalingV2().HorizontalPodAutoscalers("serving").Get(ctx, "ollama", metav1.GetOptions{})
	if err != nil || hpa.Spec.ScaleTargetRef.Kind != "StatefulSet" || hpa.Spec.MaxReplicas != 3 {
		t.Fatalf("HorizontalPodAutoscaler serving/ollama: %v %v", hpa, err)
	}

	sts := c.Client().AppsV1().StatefulSets("serving")
	if _, err := sts.UpdateScale(ctx, "ollama", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "ollama", Namespace: "serving"},
		Spec: autoscalingv1.ScaleSpec{Replicas: 3}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, code := run("plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("plan after the autoscaler scaled to 3: exit %d (want 0: no changes)\n%s", code, out)
	}
	if out, code := run("apply", "-auto-approve", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("second tofu apply: exit %d\n%s", code, out)
	}
	if s, err := sts.Get(ctx, "ollama", metav1.GetOptions{}); err != nil || *s.Spec.Replicas != 3 {
		t.Fatalf("StatefulSet serving/ollama after a second apply: %v replicas, %v; want the autoscaler's 3", s.Spec.Replicas, err)
	}

	if out, code := run("destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 || !strings.Contains(out, "Destroy complete! Resources: 3 destroyed") {
		t.Fatalf("tofu destroy: exit %d\n%s", code, out)
	}
	if _, err := c.Client().AutoscalingV2().HorizontalPodAutoscalers("serving").Get(ctx, "ollama", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("HorizontalPodAutoscaler serving/ollama after destroy: %v", err)
	}
}
