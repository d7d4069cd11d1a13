package nodes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// The gpuslice CLI agrees with the provider on a job that ran to the end:
// apply (wait_for = ready) returns once it is complete, its outputs name
// the slice it ran on, and plan -detailed-exitcode finds nothing to change.
func TestFinishedJobPlansNothingWithTheCLI(t *testing.T) {
	env := realnodetest.Shared(t)
	const ns = "finished"
	job := strings.Replace(sliceCheckJob("once", "small", strings.Replace(showSlice, "exec slice-check --sleep", "exec slice-check", 1)),
		"  wait_for  = \"none\"\n", "", 1)
	hcl := stackHCL(ns, job) + `
output "device" {
  value = gpuslice_workload.once.device
}
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	applied := cli(t, env, "apply", dir, "-stack", ns, "-auto-approve")
	t.Cleanup(func() { destroyStack(t, env, dir, ns) })
	j, err := env.Cluster.Client().BatchV1().Jobs(ns).Get(context.Background(), "once", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !jobComplete(j) {
		t.Fatalf("Job %s/once after apply: %+v, want complete", ns, j.Status)
	}
	// The claim went with the job; apply's outputs name the slice it ran on.
	if !regexp.MustCompile(`device = ".*-25pct-.*"`).MatchString(applied) {
		t.Errorf("apply's outputs do not name the slice the job ran on:\n%s", applied)
	}
	claimGone(t, env, jobPod(t, env, ns, "once"))
	cmd := exec.Command(gpusliceCLI, "plan", dir, "-stack", ns, "-detailed-exitcode")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.KubeconfigPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("gpuslice plan -detailed-exitcode after the job finished: %v (want exit 0: no changes)\n%s", err, out)
	}
}
