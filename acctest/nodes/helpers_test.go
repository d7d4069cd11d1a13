package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
)

// stackHCL is a platform, an 8 GiB (25 %) and a 16 GiB (50 %) package of the
// simulated V100 and a quota for namespace ns, plus the given workloads.
func stackHCL(ns, workloads string) string {
	return `
resource "gpuslice_platform" "this" {}

resource "gpuslice_package" "small" {
  name      = "` + ns + `-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_package" "half" {
  name      = "` + ns + `-16gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 50
}

resource "gpuslice_quota" "team" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.small.name) = 2, (gpuslice_package.half.name) = 1 }
  cpu_requests    = "2"
  memory_requests = "2Gi"
}
` + workloads
}

// sliceCheckJob is a job running the slice-check image with script.
func sliceCheckJob(name, pkg, script string) string {
	return `
resource "gpuslice_workload" "` + name + `" {
  namespace = gpuslice_quota.team.namespace
  name      = "` + name + `"
  package   = gpuslice_package.` + pkg + `.name
  kind      = "job"
  wait_for  = "none"
  container {
    image          = "registry.gpuslice.test/slice-check:1"
    command        = ["sh", "-c", ` + strconvQuote(script) + `]
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// cli runs the gpuslice CLI against the shared cluster.
func cli(t *testing.T, env *realnodetest.Env, args ...string) string {
	t.Helper()
	cmd := exec.Command(gpusliceCLI, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.KubeconfigPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gpuslice %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// applyStack applies hcl as stack and destroys it when t ends.
func applyStack(t *testing.T, env *realnodetest.Env, stack, hcl string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, env, "apply", dir, "-stack", stack, "-auto-approve")
	t.Cleanup(func() { destroyStack(t, env, dir, stack) })
	return dir
}

// reapply applies a new configuration of a stack applyStack made.
func reapply(t *testing.T, env *realnodetest.Env, dir, stack, hcl string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, env, "apply", dir, "-stack", stack, "-auto-approve")
}

func destroyStack(t *testing.T, env *realnodetest.Env, dir, stack string) {
	t.Helper()
	cmd := exec.Command(gpusliceCLI, "destroy", dir, "-stack", stack, "-auto-approve")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.KubeconfigPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("destroy %s: %v\n%s", stack, err, out)
	}
}

// jobPod waits for the pod of job name in ns.
func jobPod(t *testing.T, env *realnodetest.Env, ns, name string) *corev1.Pod {
	t.Helper()
	return &podsOf(t, env, ns, "job-name="+name, 1)[0]
}

// podsOf waits for n pods matching selector in ns and returns them.
func podsOf(t *testing.T, env *realnodetest.Env, ns, selector string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	realnodetest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d pods %s in %s", n, selector, ns), func() (bool, string) {
		list, err := env.Cluster.Client().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		pods = list.Items
		return len(pods) >= n, fmt.Sprintf("%d pods", len(pods))
	})
	return pods
}

// logsWith waits until the container's log holds want and returns it.
func logsWith(t *testing.T, env *realnodetest.Env, pod *corev1.Pod, container, want string) string {
	t.Helper()
	var logs string
	realnodetest.Eventually(t, 2*time.Minute, "log line "+want+" of "+pod.Name, func() (bool, string) {
		raw, err := env.Cluster.Client().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
		logs = string(raw)
		if err != nil {
			p, _ := env.Cluster.Client().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
			if p != nil {
				return false, fmt.Sprintf("%v; pod %s: %+v", err, p.Status.Phase, p.Status.ContainerStatuses)
			}
			return false, err.Error()
		}
		return strings.Contains(logs, want), logs
	})
	return logs
}

// claimUID is the UID of the pod's only resource claim.
func claimUID(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) string {
	t.Helper()
	return string(podClaim(t, env, pod).UID)
}

// podClaim waits for the pod's only resource claim and returns it.
func podClaim(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) *resourcev1.ResourceClaim {
	t.Helper()
	var claim *resourcev1.ResourceClaim
	realnodetest.Eventually(t, time.Minute, "the claim of pod "+pod.Name, func() (bool, string) {
		p, err := env.Cluster.Client().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, errString(err)
		}
		claim, err = env.Cluster.Client().ResourceV1().ResourceClaims(pod.Namespace).Get(context.Background(), *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return claim
}

// cdiSpec reads the claim's CDI spec on node n.
func cdiSpec(t *testing.T, n *realnode.Node, uid string) *specs.Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.CDIDir(), cdispec.SpecName(uid)))
	if err != nil {
		t.Fatalf("CDI spec of claim %s on %s: %v", uid, n.Name, err)
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// waitUnprepared waits until the claim's CDI spec and accounting directory
// are gone from n.
func waitUnprepared(t *testing.T, n *realnode.Node, uid string) {
	t.Helper()
	spec := filepath.Join(n.CDIDir(), cdispec.SpecName(uid))
	acct := filepath.Join(n.AccountingDir(), uid)
	realnodetest.Eventually(t, 2*time.Minute, "NodeUnprepareResources of claim "+uid, func() (bool, string) {
		_, specErr := os.Stat(spec)
		_, acctErr := os.Stat(acct)
		return os.IsNotExist(specErr) && os.IsNotExist(acctErr), fmt.Sprintf("spec: %v, accounting dir: %v", specErr, acctErr)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// nodeOf is the real node the pod runs on.
func nodeOf(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) *realnode.Node {
	t.Helper()
	p, err := env.Cluster.Client().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := env.Node(p.Spec.NodeName)
	if n == nil {
		t.Fatalf("pod %s runs on %q, not on a real node of this test", pod.Name, p.Spec.NodeName)
	}
	return n
}
