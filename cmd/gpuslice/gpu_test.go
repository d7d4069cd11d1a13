package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/engine/maintenance"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/simnode"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestGPUDrainCommands: `gpuslice gpu drain NODE/GPU -evict` taints that
// GPU's devices NoExecute, `gpu list` shows it drained and the other GPU
// not, `gpu undrain` deletes the rules, and a second undrain fails naming
// the GPU. A clear of health finds nothing to clear on the drained node.
func TestGPUDrainCommands(t *testing.T) {
	c := clustertest.Shared(t)
	ctx := context.Background()
	n, err := simnode.Start(ctx, c, "cli-drain-node", simulate.Spec{Profile: "v100-32gb", Count: 2}, publish.Options{Fractions: []int{50, 100}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if _, err := simnode.Published(ctx, c.Client(), []*simnode.Node{n}, time.Now(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + c.KubeconfigPath}

	out, code := run(t, env, "gpu", "drain", "cli-drain-node/1", "-evict")
	if code != 0 || !strings.Contains(out, "cli-drain-node/1 drained (NoExecute): 1 GPU(s), DeviceTaintRule(s) gpuslice-drain-cli-drain-node-gpu-1-") {
		t.Fatalf("drain: exit %d\n%s", code, out)
	}
	rules, err := c.Client().ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: "gpuslice.dev/drain=true"})
	if err != nil || len(rules.Items) != 3 { // GPU 1's two halves and its whole device
		t.Fatalf("after drain: %d rules (%v), want 3", len(rules.Items), err)
	}
	if out, code := run(t, env, "gpu", "drain", "cli-drain-node/1", "-evict"); code != 0 || !strings.Contains(out, "already drained") {
		t.Errorf("second drain: exit %d\n%s", code, out)
	}

	out, code = run(t, env, "gpu", "list")
	t.Logf("gpuslice gpu list:\n%s", out)
	if code != 0 || !regexp.MustCompile(`healthy +NoExecute +3/3 +gpuslice.dev/drain=gpu:NoExecute \(3 DeviceTaintRules\)`).MatchString(out) {
		t.Errorf("list: exit %d, no GPU drained NoExecute with 3 of 3 devices tainted\n%s", code, out)
	}
	out, code = run(t, env, "gpu", "list", "-json")
	var gpus []maintenance.GPUState
	if err := json.Unmarshal([]byte(out), &gpus); code != 0 || err != nil {
		t.Fatalf("list -json: exit %d, %v\n%s", code, err, out)
	}
	drained := map[int64]string{}
	for _, g := range gpus {
		if g.Node == "cli-drain-node" {
			drained[g.Index] = fmt.Sprintf("%s %d/%d", g.Drained, g.Tainted, g.Devices)
		}
	}
	if drained[0] != " 0/3" || drained[1] != "NoExecute 3/3" {
		t.Errorf("list -json: GPU 0 %q, GPU 1 %q; want \" 0/3\" and \"NoExecute 3/3\"", drained[0], drained[1])
	}

	// a drain is not a health taint: clear leaves it, and writes nothing
	if out, code := run(t, env, "gpu", "clear", "cli-drain-node"); code != 0 || !strings.Contains(out, "cli-drain-node: no GPU tainted gpuslice.dev/unhealthy, nothing to clear") {
		t.Errorf("clear of a drained, healthy node: exit %d\n%s", code, out)
	}
	if out, code := run(t, env, "gpu", "undrain", "cli-drain-node/1"); code != 0 || !strings.Contains(out, "cli-drain-node/1 undrained") {
		t.Errorf("undrain: exit %d\n%s", code, out)
	}
	if out, code := run(t, env, "gpu", "undrain", "cli-drain-node/1"); code != 1 || !strings.Contains(out, "Error: cli-drain-node/1 is not drained") {
		t.Errorf("second undrain: exit %d\n%s", code, out)
	}
}
