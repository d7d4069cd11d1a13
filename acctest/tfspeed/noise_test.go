package tfspeed

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/cluster"
)

// BenchmarkTenantNoise measures whether a plan's cost grows with other
// tenants' objects: `tofu plan` and `gpuslice plan` of 200 workloads (no
// changes) on two control planes holding the same two stacks, one with
// nothing else in it, the other also with 10,000 pods and 5,000
// ResourceClaims in 50 other namespaces (created directly: no kubelet runs
// them, no scheduler takes them). Half of those carry gpuslice's labels,
// as another stack's workloads would, so a read scoped by label alone
// would still see them. The plans run in turns on both, so that the
// machine's drift falls on both alike. Time, CPU time and peak memory: of
// the provider (its debug log) and of the CLI. The target (issue 29):
// within 1.2× of each other.
//
//	go test -run '^$' -bench TenantNoise -benchtime 1x -timeout 1h ./acctest/tfspeed/
func BenchmarkTenantNoise(b *testing.B) {
	const workloads, pods, claims, namespaces = 200, 10000, 5000, 50
	tools := prepare(b)
	var empty, busy noiseRow
	for b.Loop() {
		quiet, crowded := newStacks(b, tools, workloads), newStacks(b, tools, workloads)
		start := time.Now()
		addTenants(b, crowded.c, namespaces, pods, claims)
		b.Logf("%d pods and %d claims of other tenants created in %s", pods, claims, time.Since(start).Round(time.Second))
		settle(b, quiet.c)
		settle(b, crowded.c)
		var plans [2]struct{ tofu, cli []took }
		for range noisePlans {
			for i, s := range []stacks{quiet, crowded} {
				plans[i].tofu = append(plans[i].tofu, s.tofuPlan(b, tools.tofuEnv()))
			}
			for i, s := range []stacks{quiet, crowded} {
				plans[i].cli = append(plans[i].cli, s.cliPlan(b))
			}
		}
		empty = quiet.measure(b, plans[0].tofu, plans[0].cli)
		busy = crowded.measure(b, plans[1].tofu, plans[1].cli)
		quiet.c.Stop()
		crowded.c.Stop()
	}
	fmt.Print(noiseTable(workloads, pods, claims, namespaces, empty, busy))
	b.ReportMetric(busy.tofu.wall.Seconds()/empty.tofu.wall.Seconds(), "tofu-plan-ratio")
	b.ReportMetric(busy.cli.wall.Seconds()/empty.cli.wall.Seconds(), "gpuslice-plan-ratio")
}

// noisePlans is how many no-change plans of each kind run on each control
// plane; the median counts.
const noisePlans = 7

// stacks are two stacks of the same size on a control plane of their
// own: one applied with tofu, one with the CLI.
type stacks struct {
	t             tools
	c             *cluster.Cluster
	tfDir, cliDir string
}

func newStacks(b *testing.B, t tools, workloads int) stacks {
	b.Helper()
	s := stacks{t: t, c: startCluster(b), tfDir: b.TempDir(), cliDir: b.TempDir()}
	b.Cleanup(s.c.Stop)
	if err := configuration(s.tfDir, "tf", s.c.KubeconfigPath, workloads, "4096"); err != nil {
		b.Fatal(err)
	}
	if err := configuration(s.cliDir, "cli", s.c.KubeconfigPath, workloads, "4096"); err != nil {
		b.Fatal(err)
	}
	env := t.tofuEnv()
	run(b, s.tfDir, env, []int{0}, t.tofu, "init", "-input=false", "-no-color")
	run(b, s.tfDir, env, []int{0}, t.tofu, "apply", "-auto-approve", "-input=false", "-no-color")
	run(b, s.cliDir, nil, []int{0}, t.gpuslice, "apply", "-auto-approve", "--kubeconfig", s.c.KubeconfigPath)
	// A quota holds every package of the cluster (0 where it grants
	// none): the first stack's quotas take in the second's packages.
	run(b, s.tfDir, env, []int{0}, t.tofu, "apply", "-auto-approve", "-input=false", "-no-color")
	return s
}

func (s stacks) tofuPlan(b *testing.B, env []string) took {
	return run(b, s.tfDir, env, []int{0}, s.t.tofu, "plan", "-detailed-exitcode", "-input=false", "-no-color")
}

func (s stacks) cliPlan(b *testing.B) took {
	return run(b, s.cliDir, nil, []int{0}, s.t.gpuslice, "plan", "-detailed-exitcode", "--kubeconfig", s.c.KubeconfigPath)
}

// noiseRow is one control plane's figures: the medians of the no-change
// plans, the provider's peak memory and reads in one more, logged.
type noiseRow struct {
	tofu, cli      took
	providerRSS    int64
	providerReads  counts
	cliServerReads counts
}

// measure takes the medians of the plans timed, and runs one more of each
// for what the provider logs and the API server counts.
func (s stacks) measure(b *testing.B, tofu, cli []took) noiseRow {
	b.Helper()
	r := noiseRow{tofu: median(tofu), cli: median(cli)}
	for _, ts := range [][]took{tofu, cli} {
		for _, x := range ts {
			if x.rss == 0 {
				b.Fatal("no peak memory reported for a plan")
			}
		}
	}
	r.tofu.rss, r.cli.rss = maxRSS(tofu), maxRSS(cli)
	logFile := filepath.Join(s.tfDir, "noise.log")
	s.tofuPlan(b, loggedEnv(s.t.tofuEnv(), logFile))
	r.providerReads = providerCounts(b, logFile, 0)
	r.providerRSS = providerPeakRSS(b, logFile, 0)
	before := serverCounts(b, s.c)
	s.cliPlan(b)
	r.cliServerReads = serverCounts(b, s.c).sub(before).readsOnly()
	return r
}

// maxRSS is the highest peak memory of the runs: memory is not noisy the
// way time is, and the highest is what a user must have.
func maxRSS(ts []took) int64 {
	var m int64
	for _, t := range ts {
		m = max(m, t.rss)
	}
	return m
}

// The provider's log reaches tofu as JSON, whose numbers tofu prints as
// floats, quoted: "1.2345678e+08".
var rssField = regexp.MustCompile(`\bpeak_rss_bytes="?([0-9.e+]+)`)

// providerPeakRSS is the highest peak memory any provider process of the
// runs logged after offset reported.
func providerPeakRSS(b *testing.B, path string, offset int64) int64 {
	b.Helper()
	var peak int64
	var sample string
	requestLines(b, path, offset, func(line string) {
		sample = line
		m := rssField.FindStringSubmatch(line)
		if m == nil {
			return
		}
		n, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			b.Fatalf("the provider's peak memory %q: %v", m[1], err)
		}
		peak = max(peak, int64(n))
	})
	if peak == 0 {
		b.Fatalf("no peak memory in the provider's debug log %s; its request counts read: %s", path, sample)
	}
	return peak
}

// addTenants creates other tenants' pods and claims in namespaces of
// their own: pods for a scheduler that does not run (they stay Pending,
// as a busy cluster's queue does, without a controller reacting), claims
// for a class no node offers. Half carry gpuslice's labels.
func addTenants(b *testing.B, c *cluster.Cluster, namespaces, pods, claims int) {
	b.Helper()
	cfg := rest.CopyConfig(c.RESTConfig())
	cfg.QPS = -1 // no client-side limit: the API server's own flow control paces it
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for n := range namespaces {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNamespace(n)}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	type job struct {
		pod   *corev1.Pod
		claim *resourcev1.ResourceClaim
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				var err error
				if j.pod != nil {
					_, err = client.CoreV1().Pods(j.pod.Namespace).Create(ctx, j.pod, metav1.CreateOptions{})
				} else {
					_, err = client.ResourceV1().ResourceClaims(j.claim.Namespace).Create(ctx, j.claim, metav1.CreateOptions{})
				}
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range pods {
		jobs <- job{pod: tenantPod(i, namespaces)}
	}
	for i := range claims {
		jobs <- job{claim: tenantClaim(i, namespaces)}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("create other tenants' objects: %v", firstErr)
	}
}

func tenantNamespace(n int) string { return fmt.Sprintf("tenant-%02d", n) }

// tenantLabels are an app's labels, and for every other object gpuslice's,
// as another stack's workload would carry.
func tenantLabels(i int) map[string]string {
	l := map[string]string{"app.kubernetes.io/name": fmt.Sprintf("app-%d", i%40)}
	if i%2 == 0 {
		l[contract.LabelManagedBy] = contract.ManagedBy
		l["gpuslice.dev/workload"] = fmt.Sprintf("app-%d", i%40)
	}
	return l
}

func tenantPod(i, namespaces int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d-%05d", i%40, i), Namespace: tenantNamespace(i % namespaces), Labels: tenantLabels(i)},
		Spec: corev1.PodSpec{
			SchedulerName: "tenant-scheduler", // none runs
			Containers: []corev1.Container{{
				Name: "app", Image: "example.invalid/tenant/app:1.0",
				Env:   []corev1.EnvVar{{Name: "MODEL", Value: "llama3.1:8b"}, {Name: "PORT", Value: "8080"}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi"),
				}},
			}},
		},
	}
}

func tenantClaim(i, namespaces int) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%05d", i), Namespace: tenantNamespace(i % namespaces), Labels: tenantLabels(i)},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "tenant-gpu"},
		}}}},
	}
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

func noiseTable(workloads, pods, claims, namespaces int, empty, busy noiseRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nNo-change plans of %d workloads (median of %d, in turns on both control planes), in a cluster without other tenants and in one with %d pods and %d ResourceClaims in %d other namespaces:\n\n",
		workloads, noisePlans, pods, claims, namespaces)
	b.WriteString("| cluster | `tofu plan` | CPU | tofu's peak memory | provider's peak memory | provider's reads | `gpuslice plan` | CPU | peak memory | API server's reads of it |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range []struct {
		name string
		noiseRow
	}{{"no other tenants", empty}, {fmt.Sprintf("+ %d pods, %d claims", pods, claims), busy}} {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.name, sec(r.tofu.wall), sec(r.tofu.cpu), mib(r.tofu.rss),
			mib(r.providerRSS), r.providerReads, sec(r.cli.wall), sec(r.cli.cpu), mib(r.cli.rss), r.cliServerReads)
	}
	ratios := []struct {
		what       string
		busy, free float64
	}{
		{"`tofu plan` time", busy.tofu.wall.Seconds(), empty.tofu.wall.Seconds()},
		{"`tofu plan` CPU time", busy.tofu.cpu.Seconds(), empty.tofu.cpu.Seconds()},
		{"the provider's peak memory", float64(busy.providerRSS), float64(empty.providerRSS)},
		{"`gpuslice plan` time", busy.cli.wall.Seconds(), empty.cli.wall.Seconds()},
		{"`gpuslice plan` CPU time", busy.cli.cpu.Seconds(), empty.cli.cpu.Seconds()},
		{"`gpuslice plan` peak memory", float64(busy.cli.rss), float64(empty.cli.rss)},
	}
	b.WriteString("\nTargets (issue 29): with the other tenants' objects within 1.2× of without:\n")
	for _, r := range ratios {
		mark := "met"
		if r.busy/r.free > 1.2 {
			mark = "NOT met"
		}
		fmt.Fprintf(&b, "- %s: %.2f×: %s\n", r.what, r.busy/r.free, mark)
	}
	return b.String()
}
