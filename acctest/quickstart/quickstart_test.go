// Package quickstart applies examples/quickstart, examples/training and
// examples/autoscaled-inference with the OpenTofu binary a user would run
// and the provider installed by `make install` into a local filesystem
// mirror (no registry reachable), on the local control plane: apply,
// outputs naming the slice and node, a second plan with no changes, and
// destroy leaving nothing behind.
package quickstart

import (
	"context"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/acctest/internal/tofutest"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/hostpath"
)

func TestMain(m *testing.M) {
	os.Exit(clustertest.Main(m, cluster.Options{}, func(c *cluster.Cluster) error {
		_, err := c.AddNode(context.Background(), cluster.NodeSpec{Name: "gpu-node-1"})
		return err
	}))
}

// tofuEnv is the environment tofu runs an example in against c, with the
// provider make install built, waiting for scheduling only (the simulated
// node runs no containers), and vars.
func tofuEnv(t *testing.T, c *cluster.Cluster, vars ...string) []string {
	t.Helper()
	return tofutest.Env(c, tofutest.Install(t), append([]string{"TF_VAR_wait_for=scheduled"}, vars...)...)
}

func TestQuickstartWithOpenTofu(t *testing.T) {
	c := clustertest.Shared(t)
	ctx := context.Background()
	// One V100 published on the node, so Ollama's claim gets a slice.
	gpu := &draproof.Proof{Client: c.Client(), Node: "gpu-node-1", Model: "Tesla V100-PCIE-32GB"}
	if _, err := gpu.PublishGPU(ctx, 25, 50, 100); err != nil {
		t.Fatal(err)
	}
	// The local cluster's storage, as `gpuslice dev up` runs it: Ollama's
	// model volume is provisioned by the default StorageClass.
	storage, stopStorage := context.WithCancel(ctx)
	t.Cleanup(stopStorage)
	if err := hostpath.Start(storage, c.Client(), t.TempDir()); err != nil {
		t.Fatal(err)
	}

	dir := tofutest.Example(t, "quickstart")
	env := tofuEnv(t, c,
		// The simulated node runs no kubelet: the plugin's DaemonSet is
		// created and never runs (acctest/daemonset runs it on real nodes).
		"TF_VAR_node_plugin_image=registry.test/gpuslice/gpuslice-nodeplugin:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5")
	run := tofutest.In(t, dir, env)

	if out, code := run("init", "-input=false", "-no-color"); code != 0 || !strings.Contains(out, "gpuslice/gpuslice v0.1.0") {
		t.Fatalf("tofu init from the mirror: exit %d\n%s", code, out)
	}
	out, code := run("apply", "-auto-approve", "-input=false", "-no-color")
	if code != 0 || !strings.Contains(out, "Apply complete! Resources: 6 added") {
		t.Fatalf("tofu apply: exit %d\n%s", code, out)
	}
	// The outputs name what the scheduler gave Ollama.
	out, _ = run("output", "-raw", "slice")
	if !strings.HasPrefix(out, "gpu-0-25pct-") {
		t.Errorf("output slice = %q, want a 25 %% slice of gpu-0", out)
	}
	if out, _ := run("output", "-raw", "node"); out != "gpu-node-1" {
		t.Errorf("output node = %q", out)
	}
	dc, err := c.Client().ResourceV1().DeviceClasses().Get(ctx, "v100-8gi", metav1.GetOptions{})
	if err != nil || !strings.Contains(dc.Spec.Selectors[0].CEL.Expression, "fraction == 25") {
		t.Fatalf("DeviceClass v100-8gi: %v %v", dc, err)
	}

	if out, code := run("plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("second plan: exit %d (want 0: no changes)\n%s", code, out)
	}

	if out, code := run("destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 || !strings.Contains(out, "Destroy complete! Resources: 6 destroyed") {
		t.Fatalf("tofu destroy: exit %d\n%s", code, out)
	}
	for _, class := range []string{"v100-8gi", "v100-16gi", "v100-32gi"} {
		if _, err := c.Client().ResourceV1().DeviceClasses().Get(ctx, class, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("DeviceClass %s after destroy: %v", class, err)
		}
	}
	if _, err := c.Client().AppsV1().Deployments("team-a").Get(ctx, "ollama", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment team-a/ollama after destroy: %v", err)
	}
}
