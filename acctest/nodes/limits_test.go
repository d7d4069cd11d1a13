package nodes

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
)

// Root in a slice's container writes 32 GiB where the region used to keep
// the limit, drops the limit from its environment and starts a new
// process: it still sees its 8 GiB and cannot allocate past them.
func TestRegionWriteDoesNotRaiseTheLimit(t *testing.T) {
	env := realnodetest.Shared(t)
	script := fmt.Sprintf(`slice-attack poke %s/%s 24 %d
unset %s
exec slice-check`, contract.ContainerAccountingDir, contract.RegionFile, uint64(32)<<30, contract.EnvMemoryLimit)
	applyStack(t, env, "regionwrite", stackHCL("regionwrite", sliceCheckJob("check", "small", script)))
	logs := logsWith(t, env, jobPod(t, env, "regionwrite", "check"), "", "slice-check: the slice held")
	if !strings.Contains(logs, "= 34359738368: written") {
		t.Fatalf("the region write did not happen:\n%s", logs)
	}
	for _, want := range []string{"8192 MiB total", "the next block: CUDA_ERROR_OUT_OF_MEMORY"} {
		if !strings.Contains(logs, want) {
			t.Errorf("slice-check output lacks %q:\n%s", want, logs)
		}
	}
	if mib := allocatedMiB(t, logs); mib > 8192 {
		t.Errorf("allocated %d MiB on an 8192 MiB slice after the region write", mib)
	}
}

// The limits file cannot be written, truncated, chmod-ed, chown-ed,
// unlinked, renamed, replaced or linked by root in the container (which has
// DAC_OVERRIDE and FOWNER): the read-only mount holds, not the file's mode.
func TestLimitsFileCannotBeChanged(t *testing.T) {
	env := realnodetest.Shared(t)
	script := fmt.Sprintf(`if echo 0 > %[1]s; then echo "shell write: DONE"; else echo "shell write: refused"; fi
slice-attack tamper %[1]s
echo "tamper exit $?"
exec slice-check`, contract.ContainerLimitsPath)
	applyStack(t, env, "tamper", stackHCL("tamper", sliceCheckJob("check", "small", script)))
	logs := logsWith(t, env, jobPod(t, env, "tamper", "check"), "", "slice-check: the slice held")
	caps := regexp.MustCompile(`as uid 0, CapEff:\s*([0-9a-f]+)`).FindStringSubmatch(logs)
	if caps == nil {
		t.Fatalf("the attempts did not run as root:\n%s", logs)
	}
	// CAP_DAC_OVERRIDE is bit 1, CAP_FOWNER bit 3: file modes do not stop this process
	if c, _ := strconv.ParseUint(caps[1], 16, 64); c&(1<<1) == 0 || c&(1<<3) == 0 {
		t.Errorf("the container lacks DAC_OVERRIDE or FOWNER (CapEff %s): the test proves less than it says", caps[1])
	}
	if !strings.Contains(logs, "shell write: refused") || !strings.Contains(logs, "tamper exit 0") || strings.Contains(logs, ": DONE") {
		t.Errorf("an attempt on the limits file succeeded:\n%s", logs)
	}
	if !strings.Contains(logs, "8192 MiB total") {
		t.Errorf("slice-check after the attempts does not see the 8 GiB slice:\n%s", logs)
	}
}

// A process zeroes the region's count of used memory while another process
// of the claim holds 6 GiB of its 8, then allocates: the plugin's
// observation of the claim's real memory refuses it past the slice.
func TestZeroedUsageCannotTakeMore(t *testing.T) {
	env := realnodetest.Shared(t)
	applyStack(t, env, "zeroed", stackHCL("zeroed", ""))
	ns := createNamespace(t, env, "zeroed-pods")
	createClaim(t, env, ns, "slice", "zeroed-8gi")
	gpu := corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
	shared := []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "zeroed", Namespace: ns},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("slice")}},
			Volumes:        []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			RestartPolicy:  corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{{
				Name: "holder", Image: images.SliceCheck, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Command: []string{"slice-check", "--hold", "6144", "--marker", "/shared/held"}, Resources: gpu, VolumeMounts: shared,
				StartupProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "test -e /shared/held"}}},
					PeriodSeconds: 1, FailureThreshold: 120,
				},
			}},
			Containers: []corev1.Container{{
				Name: "attacker", Image: images.SliceCheck, Resources: gpu, VolumeMounts: shared,
				Command: []string{"sh", "-c", fmt.Sprintf("slice-attack poke %s/%s 64 0\nexec slice-check", contract.ContainerAccountingDir, contract.RegionFile)},
			}},
		},
	}
	createPod(t, env, pod)
	logsWith(t, env, pod, "holder", "holding 6144 MiB")
	logs := logsWith(t, env, pod, "attacker", "slice-check: the slice held")
	if !strings.Contains(logs, "at 64 = 0: written") {
		t.Fatalf("the region's count was not zeroed:\n%s", logs)
	}
	mib := allocatedMiB(t, logs)
	t.Logf("after zeroing the count, the attacker allocated %d MiB beside the holder's 6144 MiB", mib)
	if mib+6144 > 8192 {
		t.Errorf("after zeroing the count, the attacker allocated %d MiB while the holder holds 6144 MiB of the 8192 MiB slice:\n%s", mib, logs)
	}
}

// A program that allocates around the library (statically linked: the
// preload never loads) takes its claim past the slice. The node plugin's
// enforcer kills it, records an Event on its pod and counts it; another
// claim's container on the same GPU keeps running with its memory.
func TestBypassStoppedByEnforcer(t *testing.T) {
	env := realnodetest.Shared(t)
	ctx := context.Background()
	applyStack(t, env, "bypass", stackHCL("bypass", ""))
	ns := createNamespace(t, env, "bypass-pods")
	createClaim(t, env, ns, "neighbour", "bypass-8gi")
	createClaim(t, env, ns, "attacker", "bypass-8gi")
	neighbour := claimPod(ns, "neighbour", "neighbour", []string{"slice-check", "--hold", "4096"})
	createPod(t, env, neighbour)
	logsWith(t, env, neighbour, "", "holding 4096 MiB")
	node := nodeOf(t, env, neighbour)
	neighbourClaim, err := env.Cluster.Client().ResourceV1().ResourceClaims(ns).Get(ctx, "neighbour", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// the neighbour's memory as NVML shows it, once the plugin sees it
	var before float64
	realnodetest.Eventually(t, time.Minute, "the neighbour's memory in the plugin's metrics", func() (bool, string) {
		before = realnodetest.ClaimMetric(realnodetest.Scrape(t, node), "gpuslice_claim_nvml_memory_used_bytes", string(neighbourClaim.UID))
		return before >= 4096<<20, fmt.Sprint(before)
	})

	attacker := claimPod(ns, "attacker", "attacker", []string{"slice-attack", "alloc", "10240", "--hold"})
	createPod(t, env, attacker)
	logs := logsWith(t, env, attacker, "", "around the library")
	m := regexp.MustCompile(`allocated (\d+) MiB around the library at unix_ns=(\d+) pid=(\d+)`).FindStringSubmatch(logs)
	if m == nil || m[1] != "10240" {
		t.Fatalf("the bypass did not allocate its 10240 MiB:\n%s", logs)
	}
	overAt, _ := strconv.ParseInt(m[2], 10, 64)

	// killed: the container ends with SIGKILL's status
	realnodetest.Eventually(t, time.Minute, "the attacker's container to be killed", func() (bool, string) {
		p, err := env.Cluster.Client().CoreV1().Pods(ns).Get(ctx, attacker.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, errString(err)
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		return term != nil && term.ExitCode == 137, fmt.Sprintf("%+v", p.Status.ContainerStatuses[0].State)
	})
	var ev eventsv1.Event
	realnodetest.Eventually(t, time.Minute, "a "+driver.EventReasonMemoryLimitExceeded+" event on the attacker's pod", func() (bool, string) {
		list, err := env.Cluster.Client().EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == driver.EventReasonMemoryLimitExceeded && e.Regarding.Kind == "Pod" && e.Regarding.Name == attacker.Name {
				ev = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "process "+m[3]+" (slice-attack)") || !strings.Contains(ev.Note, "of its 8192 MiB limit") ||
		!strings.Contains(ev.Note, "held 10240 MiB") {
		t.Errorf("event %s: %q, want a warning naming the process, its memory and the limit", ev.Type, ev.Note)
	}
	t.Logf("killed %v after the program finished allocating past the slice (event time %s)", ev.EventTime.Sub(time.Unix(0, overAt)).Round(time.Millisecond), ev.EventTime.Format(time.RFC3339Nano))

	attackerClaim, err := env.Cluster.Client().ResourceV1().ResourceClaims(ns).Get(ctx, "attacker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	metrics := realnodetest.Scrape(t, node)
	if n := realnodetest.ClaimMetric(metrics, "gpuslice_claim_enforcer_kills_total", string(attackerClaim.UID)); n != 1 {
		t.Errorf("gpuslice_claim_enforcer_kills_total of the attacker's claim: %v, want 1", n)
	}
	if n := realnodetest.ClaimMetric(metrics, "gpuslice_claim_enforcer_kills_total", string(neighbourClaim.UID)); n != 0 {
		t.Errorf("gpuslice_claim_enforcer_kills_total of the neighbour's claim: %v, want 0", n)
	}
	if sum, count := realnodetest.MetricValue(metrics, "gpuslice_enforcer_sample_duration_seconds_sum"), realnodetest.MetricValue(metrics, "gpuslice_enforcer_sample_duration_seconds_count"); count > 0 {
		t.Logf("enforcer: %.0f samples, %.1f µs each on average", count, sum/count*1e6)
	}

	// the neighbour: running, never restarted, its memory as before
	p, err := env.Cluster.Client().CoreV1().Pods(ns).Get(ctx, neighbour.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil || cs[0].RestartCount != 0 {
		t.Errorf("the neighbour's container: %+v, want running, never restarted", cs)
	}
	if after := realnodetest.ClaimMetric(metrics, "gpuslice_claim_nvml_memory_used_bytes", string(neighbourClaim.UID)); after != before {
		t.Errorf("the neighbour's memory went from %v to %v bytes", before, after)
	}
}

// Root in the container renames /run, which holds the mount of the limits
// file (a mount point itself cannot be renamed, a directory above one can),
// puts a limits file of its own where the library looks and drops the limit
// from its environment: the library then grants what the forged file says,
// as it would to a process that never loaded it. The enforcer holds it: the
// process that takes the claim past its slice is killed.
func TestMovedLimitsAreContained(t *testing.T) {
	env := realnodetest.Shared(t)
	ctx := context.Background()
	applyStack(t, env, "moved", stackHCL("moved", ""))
	ns := createNamespace(t, env, "moved-pods")
	createClaim(t, env, ns, "slice", "moved-8gi")
	script := fmt.Sprintf(`slice-attack rename /run /run.moved
slice-attack forge %s %d
unset %s
exec slice-check --hold 12288`, contract.ContainerAccountingDir, uint64(30)<<30, contract.EnvMemoryLimit)
	pod := claimPod(ns, "moved", "slice", []string{"sh", "-c", script})
	createPod(t, env, pod)
	logs := logsWith(t, env, pod, "", "granting")
	if !strings.Contains(logs, "rename: DONE") {
		t.Fatalf("the rename did not happen:\n%s", logs)
	}
	realnodetest.Eventually(t, time.Minute, "the container past its slice to be killed", func() (bool, string) {
		p, err := env.Cluster.Client().CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, errString(err)
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		return term != nil && term.ExitCode == 137, fmt.Sprintf("%+v\n%s", p.Status.ContainerStatuses[0].State, logsOf(t, env, pod))
	})
	logs = logsOf(t, env, pod)
	if !strings.Contains(logs, "holding 12288 MiB") {
		t.Logf("killed before it said it held the memory:\n%s", logs)
	}
	realnodetest.Eventually(t, time.Minute, "a "+driver.EventReasonMemoryLimitExceeded+" event on the pod", func() (bool, string) {
		list, err := env.Cluster.Client().EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == driver.EventReasonMemoryLimitExceeded && e.Regarding.Name == pod.Name {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
}

// logsOf is the pod's one container's log as it is now.
func logsOf(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) string {
	t.Helper()
	raw, err := env.Cluster.Client().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func allocatedMiB(t *testing.T, logs string) int {
	t.Helper()
	m := regexp.MustCompile(`allocated (\d+) MiB`).FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("no allocation reported:\n%s", logs)
	}
	mib, _ := strconv.Atoi(m[1])
	return mib
}

// createNamespace creates ns, deleted when t ends, and returns its name.
func createNamespace(t *testing.T, env *realnodetest.Env, ns string) string {
	t.Helper()
	client := env.Cluster.Client()
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

func createClaim(t *testing.T, env *realnodetest.Env, ns, name, class string) {
	t.Helper()
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class},
		}}}},
	}
	if _, err := env.Cluster.Client().ResourceV1().ResourceClaims(ns).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// claimPod is a pod of one slice-check container running command with the
// claim; it is never restarted.
func claimPod(ns, name, claim string, command []string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}},
			RestartPolicy:  corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "main", Image: images.SliceCheck, Command: command,
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
}

// createPod creates the pod and deletes it (waiting for its claims to be
// unprepared on its node) when t ends.
func createPod(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) {
	t.Helper()
	client := env.Cluster.Client()
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return
		}
		var uids []string
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.ResourceClaimName != nil {
				if c, err := client.ResourceV1().ResourceClaims(pod.Namespace).Get(context.Background(), *s.ResourceClaimName, metav1.GetOptions{}); err == nil {
					uids = append(uids, string(c.UID))
				}
			}
		}
		if err := client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Error(err)
			return
		}
		if n := env.Node(p.Spec.NodeName); n != nil {
			for _, uid := range uids {
				waitUnprepared(t, n, uid)
			}
		}
	})
}
