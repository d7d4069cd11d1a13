package nodes

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// anySizeHCL is a platform, any-size packages of 6 GiB/20 %, 20 GiB/60 %
// and 8 GiB/30 % of the simulated V100, a time-sliced package of two per
// GPU and a quota for namespace ns, plus the given workloads.
func anySizeHCL(ns, workloads string) string {
	return `
resource "gpuslice_platform" "this" {}

resource "gpuslice_package" "small" {
  name          = "` + ns + `-6gi"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "6Gi"
  compute_share = 20
}

resource "gpuslice_package" "large" {
  name          = "` + ns + `-20gi"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "20Gi"
  compute_share = 60
}

resource "gpuslice_package" "mid" {
  name          = "` + ns + `-8gi"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "8Gi"
  compute_share = 30
}

resource "gpuslice_package" "shared" {
  name      = "` + ns + `-ts"
  gpu_model = "Tesla V100-PCIE-32GB"
  sharing   = "time-sliced"
  replicas  = 2
}

resource "gpuslice_quota" "team" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.small.name) = 1, (gpuslice_package.large.name) = 1, (gpuslice_package.mid.name) = 1, (gpuslice_package.shared.name) = 2 }
  cpu_requests    = "2"
  memory_requests = "2Gi"
}
` + workloads
}

// Two any-size workloads, 6 GiB/20 % and 20 GiB/60 %, share the simulated
// V100 of a real node: each container sees its own amount (nvidia-smi, the
// CUDA driver's total), is refused past it and gets the consumed capacity
// in its CDI spec; a third, 8 GiB/30 %, would overflow the GPU and waits;
// deleting them unprepares.
func TestAnySizeSlicesShareOneGPU(t *testing.T) {
	env := realnodetest.Shared(t)
	const ns = "anysize"
	workloads := sliceCheckJob("six", "small", showSlice) + sliceCheckJob("twenty", "large", showSlice)
	dir := applyStack(t, env, ns, anySizeHCL(ns, workloads))
	var prepared []func()
	for job, want := range map[string]struct {
		mib, share int
	}{"six": {6144, 20}, "twenty": {20480, 60}} {
		pod := jobPod(t, env, ns, job)
		logs := logsWith(t, env, pod, "", "slice-check: the slice held")
		if !strings.Contains(logs, "0MiB / "+pad(want.mib)+"MiB") || !strings.Contains(logs, strconv.Itoa(want.mib)+" MiB total") {
			t.Errorf("%s: the container does not see its %d MiB:\n%s", job, want.mib, logs)
		}
		if m := regexp.MustCompile(`allocated (\d+) MiB`).FindStringSubmatch(logs); m == nil {
			t.Errorf("%s: no allocation reported:\n%s", job, logs)
		} else if mib, _ := strconv.Atoi(m[1]); mib > want.mib || mib < want.mib-1024 {
			t.Errorf("%s: allocated %d MiB on a %d MiB slice, want up to the slice less the context's overhead", job, mib, want.mib)
		}
		node, uid := nodeOf(t, env, pod), claimUID(t, env, pod)
		edits := cdiSpec(t, node, uid).Devices[0].ContainerEdits
		for _, kv := range []string{contract.EnvMemoryLimit + "=" + strconv.Itoa(want.mib<<20), contract.EnvComputeShare + "=" + strconv.Itoa(want.share)} {
			if !contains(edits.Env, kv) {
				t.Errorf("%s: CDI spec environment %v lacks %s (the consumed capacity)", job, edits.Env, kv)
			}
		}
		prepared = append(prepared, func() { waitUnprepared(t, node, uid) })
	}

	// 26 GiB and 80 % of the GPU are taken: 8 GiB and 30 % wait.
	reapply(t, env, dir, ns, anySizeHCL(ns, workloads+sliceCheckJob("eight", "mid", showSlice)))
	pod := jobPod(t, env, ns, "eight")
	realnodetest.Eventually(t, time.Minute, "pod eight waiting for a slice", func() (bool, string) {
		p, err := env.Cluster.Client().CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "cannot allocate all claims") {
				return true, ""
			}
		}
		return false, p.Spec.NodeName + " " + string(p.Status.Phase)
	})
	if out := cli(t, env, "status", dir, "-stack", ns); !strings.Contains(flat(out), "no GPU has 8Gi of memory and 30 % of its compute free") {
		t.Errorf("gpuslice status does not say why eight waits:\n%s", out)
	}
	destroyStack(t, env, dir, ns)
	for _, wait := range prepared {
		wait()
	}
}

// A time-sliced pair shares the simulated V100 whole: each container sees
// all 32768 MiB (and the other's memory in use: one GPU), with no shim
// preloaded and no limit in its environment.
func TestTimeSlicedPairSeesTheWholeGPU(t *testing.T) {
	env := realnodetest.Shared(t)
	const ns = "timesliced"
	// the image has a shell and slice-check, no cat or sleep
	script := `nvidia-smi; export -p; while read -r l; do printf '%s\n' "$l"; done < /etc/ld.so.preload; echo done; exec slice-check --hold 1`
	dir := applyStack(t, env, ns, anySizeHCL(ns, strings.Replace(sliceCheckJob("pair", "shared", script), `kind      = "job"`, "kind      = \"job\"\n  replicas  = 2", 1)))
	var pods []corev1.Pod
	realnodetest.Eventually(t, 2*time.Minute, "both pods of the time-sliced pair", func() (bool, string) {
		list, err := env.Cluster.Client().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=pair"})
		if err != nil {
			return false, err.Error()
		}
		pods = list.Items
		return len(pods) == 2, strconv.Itoa(len(pods))
	})
	var prepared []func()
	for i := range pods {
		logs := logsWith(t, env, &pods[i], "", "done")
		if !regexp.MustCompile(`\d+MiB /  32768MiB`).MatchString(logs) {
			t.Errorf("%s does not see the whole GPU:\n%s", pods[i].Name, logs)
		}
		if strings.Contains(logs, contract.ContainerLibraryPath) || strings.Contains(logs, contract.EnvMemoryLimit) {
			t.Errorf("%s is limited (shim preloaded or a memory limit set):\n%s", pods[i].Name, logs)
		}
		node, uid := nodeOf(t, env, &pods[i]), claimUID(t, env, &pods[i])
		prepared = append(prepared, func() { waitUnprepared(t, node, uid) })
	}
	destroyStack(t, env, dir, ns)
	for _, wait := range prepared {
		wait()
	}
}

// pad right-aligns MiB as nvidia-smi prints them ("  8192MiB").
func pad(mib int) string {
	s := strconv.Itoa(mib)
	for len(s) < 6 {
		s = " " + s
	}
	return s
}

func flat(out string) string { return strings.Join(strings.Fields(out), " ") }
