package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/acctest/internal/tofutest"
	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/hostpath"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// fleetOverride is an OpenTofu override file replacing each workload's
// container block with the slice-check image (the real nodes pull only the
// images of internal/images, not Ollama's or PyTorch's) printing what the
// container sees, with requests two CPUs per node can hold. The services
// stay up; the evals Job runs slice-check once and completes, as a real
// evaluation does. Packages, quotas, kinds, replicas, models, volumes and
// wait_for stay as the example has them: apply waits for the services to
// be ready and for the Job to complete.
func fleetOverride() string {
	var b strings.Builder
	for _, w := range []struct{ name, script, more string }{
		{"chat", showMIG, ""}, {"chat_staging", showSlice, ""}, {"research", showMIG, ""}, {"evals", strings.Replace(showSlice, "exec slice-check --sleep", "exec slice-check", 1), ""},
	} {
		fmt.Fprintf(&b, `resource "gpuslice_workload" %q {%s
  container {
    image          = %q
    command        = ["sh", "-c", %s]
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`, w.name, w.more, images.SliceCheck, strconvQuote(w.script))
	}
	return b.String()
}

// examples/mixed-fleet applied with OpenTofu and the provider from `make
// install`, on a V100 node with two GPUs and an A100 node in MIG mode (two
// 1g.5gb and one 3g.20gb instance) beside the package's V100 node: each
// container
// sees its own device — a V100 slice's its slice's memory through the shim,
// a MIG instance's the profile's memory with its UUID visible, no shim,
// and exactly its parent's and its instance's device nodes —; a second plan
// is empty; destroy removes everything and the nodes unprepare every claim.
func TestMixedFleetWithOpenTofu(t *testing.T) {
	env := realnodetest.Shared(t)
	fleet := realnodetest.Start(t, env.Cluster, realnodetest.Options{
		Names:    []string{"fleet-v100", "fleet-a100"},
		NodeGPUs: map[string]string{"fleet-v100": "v100-32gb:2", "fleet-a100": migGPUs},
	})
	client := env.Cluster.Client()
	ctx := context.Background()
	// The chat, staging and 8B workloads keep their models on volumes.
	storage, stopStorage := context.WithCancel(ctx)
	t.Cleanup(stopStorage)
	if err := hostpath.Start(storage, client, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	// Destroy keeps model volumes; their namespaces go with the test.
	t.Cleanup(func() {
		for _, ns := range []string{"team-chat", "team-research"} {
			if err := client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete namespace %s: %v", ns, err)
			}
		}
	})

	dir := tofutest.Example(t, "mixed-fleet")
	if err := os.WriteFile(filepath.Join(dir, "slice_check_override.tf"), []byte(fleetOverride()), 0o644); err != nil {
		t.Fatal(err)
	}
	run := tofutest.In(t, dir, tofutest.Env(env.Cluster, tofutest.Install(t)))
	if out, code := run("init", "-input=false", "-no-color"); code != 0 || !strings.Contains(out, "gpuslice/gpuslice v0.1.0") {
		t.Fatalf("tofu init from the mirror: exit %d\n%s", code, out)
	}
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			if out, code := run("destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 {
				t.Errorf("tofu destroy: exit %d\n%s", code, out)
			}
		}
	})
	if out, code := run("apply", "-auto-approve", "-input=false", "-no-color"); code != 0 || !strings.Contains(out, "Apply complete! Resources: 10 added") {
		t.Fatalf("tofu apply: exit %d\n%s", code, out)
	}
	// Apply waited for the evals Job to complete.
	evals, err := client.BatchV1().Jobs("team-research").Get(ctx, "evals", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !jobComplete(evals) {
		t.Errorf("Job team-research/evals after apply: %+v, want complete", evals.Status)
	}

	node := func(pod *corev1.Pod) *realnode.Node {
		t.Helper()
		p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []*realnodetest.Env{fleet, env} {
			if n := e.Node(p.Spec.NodeName); n != nil {
				return n
			}
		}
		t.Fatalf("pod %s runs on %q, not on a real node of this test", pod.Name, p.Spec.NodeName)
		return nil
	}
	type prepared struct {
		node *realnode.Node
		uid  string
	}
	var claims []prepared

	// The A100's MIG instances: the profile's memory, hardware-isolated.
	for _, w := range []struct {
		ns, name, profile string
		memoryMiB         int
	}{{"team-chat", "chat", "1g.5gb", 4864}, {"team-research", "llama-8b", "3g.20gb", 19968}} {
		pod := &podsOf(t, env, w.ns, "app.kubernetes.io/name="+w.name, 1)[0]
		logs := logsWith(t, env, pod, "", "slice-check: the slice held")
		t.Logf("%s/%s on %s:\n%s", w.ns, w.name, w.profile, logs)
		claim := podClaim(t, env, pod)
		status := migStatus(t, env, w.ns, claim.Name)
		checkMIGContainer(t, logs, status, w.profile, w.memoryMiB)
		n := node(pod)
		if n.Name != "fleet-a100" {
			t.Errorf("%s runs on %s, want the A100 node", w.name, n.Name)
		}
		if m := realnodetest.Scrape(t, n); !strings.Contains(m, migMetric(status, w.ns, claim.Name)) {
			t.Errorf("the node plugin's metrics lack %s", migMetric(status, w.ns, claim.Name))
		}
		claims = append(claims, prepared{n, status.claimUID})
	}

	// The V100 slices: their fraction's memory, held by the shim.
	for _, w := range []struct {
		ns, selector string
		pods         int
		memoryMiB    int
		finished     bool
	}{{"team-chat", "app.kubernetes.io/name=chat-staging", 1, 8192, false}, {"team-research", "job-name=evals", 2, 16384, true}} {
		for _, pod := range podsOf(t, env, w.ns, w.selector, w.pods) {
			logs := logsWith(t, env, &pod, "", "slice-check: the slice held")
			t.Logf("%s/%s:\n%s", w.ns, pod.Name, logs)
			if !regexp.MustCompile(fmt.Sprintf(` 0MiB / +%dMiB \|`, w.memoryMiB)).MatchString(logs) || !strings.Contains(logs, fmt.Sprintf("%d MiB total", w.memoryMiB)) {
				t.Errorf("%s does not see its %d MiB slice:\n%s", pod.Name, w.memoryMiB, logs)
			}
			if !strings.Contains(logs, "preload: "+contract.ContainerLibraryPath) {
				t.Errorf("/etc/ld.so.preload of %s does not load the shim:\n%s", pod.Name, logs)
			}
			if strings.Contains(logs, "MIG-") {
				t.Errorf("%s sees a MIG instance:\n%s", pod.Name, logs)
			}
			if n := node(&pod); n.Name == "fleet-a100" {
				t.Errorf("%s runs on the A100 node", pod.Name)
			}
			if w.finished {
				// Its claim is released with it: the cluster no longer
				// says which device it ran on.
				claimGone(t, env, &pod)
				continue
			}
			claims = append(claims, prepared{node(&pod), claimUID(t, env, &pod)})
		}
	}

	// The outputs say which isolation holds each package, and name each
	// workload's device: the finished Job's, the one it ran on.
	out, _ := run("output", "-json", "slices")
	var sl map[string]string
	if err := json.Unmarshal([]byte(out), &sl); err != nil {
		t.Fatalf("output slices: %v\n%s", err, out)
	}
	for name, want := range map[string]string{
		"v100-8gi":  "8Gi, 25 % compute, software isolation",
		"v100-16gi": "16Gi, 50 % compute, software isolation",
		"a100-1g":   "4864Mi, 14 % compute, MIG 1g.5gb: hardware isolation",
		"a100-3g":   "19968Mi, 43 % compute, MIG 3g.20gb: hardware isolation",
	} {
		if sl[name] != want {
			t.Errorf("output slices[%s] = %q, want %q", name, sl[name], want)
		}
	}
	out, _ = run("output", "-json", "devices")
	var devices map[string]string
	if err := json.Unmarshal([]byte(out), &devices); err != nil {
		t.Fatalf("output devices: %v\n%s", err, out)
	}
	for name, kind := range map[string]string{"chat": "-mig-1g-5gb-", "research": "-mig-3g-20gb-", "chat_staging": "-25pct-", "evals": "-50pct-"} {
		if !strings.Contains(devices[name], kind) {
			t.Errorf("output devices[%s] = %q, want a device named *%s*", name, devices[name], kind)
		}
	}

	// With the Job finished and its claims gone, nothing to change: no
	// attribute or output moved.
	if out, code := run("plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("second plan: exit %d (want 0: no changes)\n%s", code, out)
	}

	out, code := run("destroy", "-auto-approve", "-input=false", "-no-color")
	destroyed = true
	if code != 0 || !strings.Contains(out, "Destroy complete! Resources: 10 destroyed") {
		t.Fatalf("tofu destroy: exit %d\n%s", code, out)
	}
	for _, c := range claims {
		waitUnprepared(t, c.node, c.uid)
	}
	for _, class := range []string{"v100-8gi", "v100-16gi", "a100-1g", "a100-3g"} {
		if _, err := client.ResourceV1().DeviceClasses().Get(ctx, class, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("DeviceClass %s after destroy: %v", class, err)
		}
	}
	for _, ns := range []string{"team-chat", "team-research"} {
		realnodetest.Eventually(t, 2*time.Minute, "no pods or claims left in "+ns, func() (bool, string) {
			pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			return len(pods.Items) == 0 && len(claims.Items) == 0, fmt.Sprintf("%d pods, %d claims", len(pods.Items), len(claims.Items))
		})
	}
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// claimGone waits until the claim a finished pod had is deleted.
func claimGone(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) {
	t.Helper()
	p, err := env.Cluster.Client().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s names no claim: %+v", pod.Name, p.Status.ResourceClaimStatuses)
	}
	name := *p.Status.ResourceClaimStatuses[0].ResourceClaimName
	realnodetest.Eventually(t, time.Minute, "deletion of claim "+name+" of finished pod "+pod.Name, func() (bool, string) {
		_, err := env.Cluster.Client().ResourceV1().ResourceClaims(pod.Namespace).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), errString(err)
	})
}
