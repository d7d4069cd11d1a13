package tfspeed

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

type tools struct {
	tofu, gpuslice, tfrc string
	schemaFloorTfrc      string // installs ./schemafloor (schemafloor_test.go)
}

// prepare installs the provider with `make install` into a mirror of its
// own, as a user would, and builds the CLI and the schema floor.
func prepare(b *testing.B) tools {
	b.Helper()
	clustertest.RequireTools(b)
	tofu, err := cluster.ToolPath(cluster.FindBinDir(), cluster.Tofu)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	t := tools{tofu: tofu, tfrc: filepath.Join(dir, "gpuslice.tfrc")}
	install := exec.Command("make", "-s", "install", "MIRROR="+filepath.Join(dir, "mirror"), "TFRC="+t.tfrc)
	install.Dir = "../.."
	if out, err := install.CombinedOutput(); err != nil {
		b.Fatalf("make install: %v\n%s", err, out)
	}
	t.gpuslice = buildCLI(b)
	t.schemaFloorTfrc = buildSchemaFloor(b, dir)
	return t
}

// buildCLI builds the gpuslice CLI as a user runs it.
func buildCLI(b testing.TB) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "gpuslice")
	if out, err := cliBuild("../..", path).CombinedOutput(); err != nil {
		b.Fatalf("build the CLI: %v\n%s", err, out)
	}
	return path
}

// cliBuild builds the CLI of the module in dir as a release does (static,
// no symbol table or debug information), like the peers it is measured
// against: the binary's pages a run touches are part of its peak RSS.
func cliBuild(dir, out string) *exec.Cmd {
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cmd/gpuslice")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	return build
}

// took is how long a command ran: wall-clock time, and the CPU time of the
// command and of the children it waited for (tofu waits for its provider).
// The CPU time is the figure to compare on a shared, noisy machine.
// rss is the peak resident memory of the largest of them (the kernel
// reports the maximum over a process and the children it waited for);
// anon and file are the largest anonymous and file-backed resident memory
// of the command's own process (file: for a static binary, its pages).
type took struct {
	wall, cpu       time.Duration
	rss, anon, file int64
}

// run runs a command in dir (under peakrss, peakrss_test.go), returning
// how long it took; exit codes other than those allowed fail the benchmark
// with the output.
func run(b testing.TB, dir string, env []string, allowed []int, name string, args ...string) took {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	report := newReport()
	cmd := exec.CommandContext(ctx, peakRSSTool(b), append([]string{report, name}, args...)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		b.Fatal(err)
	}
	for _, a := range allowed {
		if a == code {
			r := readReport(b, report)
			return took{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), rss: r.peak, anon: r.anon, file: r.file}
		}
	}
	b.Fatalf("%s %s: exit %d\n%s", filepath.Base(name), strings.Join(args, " "), code, tail(string(out), 60))
	return took{}
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// tofuEnv is the environment of the measured commands: no log, as a user
// runs them.
func (t tools) tofuEnv() []string {
	return []string{"TF_CLI_CONFIG_FILE=" + t.tfrc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		// Nothing may be downloaded.
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9"}
}

// loggedEnv adds the provider's debug log, which carries its request
// counts (the SDK's own debug lines left out), written to logFile.
func loggedEnv(env []string, logFile string) []string {
	return append(append([]string(nil), env...),
		"TF_LOG_PROVIDER=DEBUG", "TF_LOG_SDK=OFF", "TF_LOG_SDK_FRAMEWORK=OFF", "TF_LOG_SDK_PROTO=OFF", "TF_LOG_PATH="+logFile)
}

// plans is how many times a no-change plan is timed; the median counts.
const plans = 5

func median(ts []took) took {
	sort.Slice(ts, func(i, j int) bool { return ts[i].wall < ts[j].wall })
	return ts[len(ts)/2]
}

func measureTofu(b *testing.B, t tools, r *row) {
	c := startCluster(b)
	defer c.Stop()
	dir := b.TempDir()
	logFile := filepath.Join(dir, "tofu.log")
	env := t.tofuEnv()
	if err := configuration(dir, "tf", c.KubeconfigPath, r.workloads, "4096"); err != nil {
		b.Fatal(err)
	}
	tofuWith := func(env []string, allowed []int, args ...string) took {
		return run(b, dir, env, allowed, t.tofu, append(args, "-input=false", "-no-color")...)
	}
	tofu := func(allowed []int, args ...string) took { return tofuWith(env, allowed, args...) }
	tofu([]int{0}, "init")
	before := serverCounts(b, c)
	r.tofuCreate = tofu([]int{0}, "apply", "-auto-approve").wall
	r.createServer = serverCounts(b, c).sub(before)
	settle(b, c)

	// The requests of a no-change plan, as the provider (its debug log) and
	// the API server count them; then the plan timed as a user runs it.
	mark := logSize(logFile)
	before = serverCounts(b, c)
	tofuWith(loggedEnv(env, logFile), []int{0}, "plan", "-detailed-exitcode")
	r.planServer = serverCounts(b, c).sub(before).readsOnly()
	r.planProvider = providerCounts(b, logFile, mark)
	floorDir, floorEnv := schemaFloorStack(b, t, dir)
	var timed, noRefresh, schemaFloor []took
	for range plans {
		timed = append(timed, tofu([]int{0}, "plan", "-detailed-exitcode"))
		noRefresh = append(noRefresh, tofu([]int{0}, "plan", "-refresh=false", "-detailed-exitcode"))
		// exit 0: the floor plans no change either
		schemaFloor = append(schemaFloor, run(b, floorDir, floorEnv, []int{0}, t.tofu, "plan", "-detailed-exitcode", "-input=false", "-no-color"))
	}
	plan := median(timed)
	r.tofuPlan, r.tofuPlanCPU = plan.wall, plan.cpu
	r.tofuPlanNoRefresh = median(noRefresh).wall
	floorPlan := median(schemaFloor)
	r.schemaFloorPlan, r.schemaFloorPlanCPU = floorPlan.wall, floorPlan.cpu
	profilePlan(b, loggedEnv(env, logFile), strconv.Itoa(r.workloads), func(env []string, allowed []int, args ...string) {
		run(b, dir, env, allowed, t.tofu, append(args, "-input=false", "-no-color")...)
	})

	if err := configuration(dir, "tf", c.KubeconfigPath, r.workloads, "16384"); err != nil {
		b.Fatal(err)
	}
	before = serverCounts(b, c)
	r.tofuUpdate = tofu([]int{0}, "apply", "-auto-approve").wall
	r.updateServer = serverCounts(b, c).sub(before)
	tofu([]int{0}, "plan", "-detailed-exitcode") // and nothing is left to change
}

func measureCLI(b *testing.B, t tools, r *row) {
	c := startCluster(b)
	defer c.Stop()
	dir := filepath.Join(b.TempDir(), "cli")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := configuration(dir, "cli", c.KubeconfigPath, r.workloads, "4096"); err != nil {
		b.Fatal(err)
	}
	cli := func(allowed []int, args ...string) took {
		return run(b, dir, nil, allowed, t.gpuslice, append(args, "--kubeconfig", c.KubeconfigPath)...)
	}
	r.cliCreate = cli([]int{0}, "apply", "-auto-approve").wall
	settle(b, c)
	before := serverCounts(b, c)
	plan := cli([]int{0}, "plan", "-detailed-exitcode")
	r.cliPlan, r.cliPlanCPU = plan.wall, plan.cpu
	r.cliPlanServer = serverCounts(b, c).sub(before).readsOnly()
	if err := configuration(dir, "cli", c.KubeconfigPath, r.workloads, "16384"); err != nil {
		b.Fatal(err)
	}
	r.cliUpdate = cli([]int{0}, "apply", "-auto-approve").wall
}

func measureFloor(b *testing.B, t tools, r *row) {
	dir := b.TempDir()
	if err := floor(dir, r.resources); err != nil {
		b.Fatal(err)
	}
	env := []string{"TF_CLI_CONFIG_FILE=" + t.tfrc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1"}
	tofu := func(args ...string) took {
		return run(b, dir, env, []int{0}, t.tofu, append(args, "-input=false", "-no-color")...)
	}
	tofu("init")
	r.floorCreate = tofu("apply", "-auto-approve").wall
	plan := tofu("plan", "-detailed-exitcode")
	r.floorPlan, r.floorPlanCPU = plan.wall, plan.cpu
}

func startCluster(b testing.TB) *cluster.Cluster {
	b.Helper()
	c, err := cluster.Start(context.Background(), cluster.Options{})
	if err != nil {
		b.Fatalf("start control plane: %v", err)
	}
	return c
}

// settle waits until the controllers have caught up with what an apply
// wrote (every Deployment and ReplicaSet observed) and the control plane is
// quiet (under a tenth of a core for a second: EndpointSlices, quota usage),
// so the plans after it are timed as a user's next plan meets the cluster,
// not beside a controller manager still reacting to 200 new workloads.
func settle(b *testing.B, c *cluster.Cluster) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ds, err := c.Client().AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		rss, err := c.Client().AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range ds.Items {
			if d.Status.ObservedGeneration < d.Generation {
				return false, nil
			}
		}
		for _, rs := range rss.Items {
			if rs.Status.ObservedGeneration < rs.Generation {
				return false, nil
			}
		}
		return len(rss.Items) >= len(ds.Items), nil
	})
	if err != nil {
		b.Fatalf("wait for the controllers to observe every Deployment and ReplicaSet: %v", err)
	}
	start, last := time.Now(), cpuTicks(b, c.PIDs())
	err = wait.PollUntilContextCancel(ctx, time.Second, false, func(context.Context) (bool, error) {
		now := cpuTicks(b, c.PIDs())
		quiet := now-last < 10 // clock ticks of 10 ms: a tenth of a core over the second
		last = now
		return quiet, nil
	})
	if err != nil {
		b.Fatalf("wait for the control plane to be quiet: %v", err)
	}
	b.Logf("control plane quiet %s after the apply's objects were observed", time.Since(start).Round(time.Second))
}

// cpuTicks is the CPU time (user and system, in clock ticks) the processes
// have used.
func cpuTicks(b *testing.B, pids []int) int64 {
	b.Helper()
	var sum int64
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatalf("control plane process %d: %v", pid, err)
		}
		// The fields after the command name, which ends at the last ')'.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		for _, f := range fields[11:13] { // utime, stime
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				b.Fatalf("parse /proc/%d/stat: %v", pid, err)
			}
			sum += n
		}
	}
	return sum
}

// counts are API requests by verb.
type counts struct{ list, watch, get, create, update, patch, delete int64 }

func (c counts) reads() int64 { return c.list + c.watch + c.get }
func (c counts) total() int64 { return c.reads() + c.create + c.update + c.patch + c.delete }
func (c counts) readsOnly() counts {
	return counts{list: c.list, watch: c.watch, get: c.get}
}
func (c counts) sub(o counts) counts {
	return counts{c.list - o.list, c.watch - o.watch, c.get - o.get, c.create - o.create, c.update - o.update, c.patch - o.patch, c.delete - o.delete}
}
func (c counts) String() string {
	return fmt.Sprintf("list %d, watch %d, get %d", c.list, c.watch, c.get)
}

func (c *counts) add(verb string, n int64) {
	switch strings.ToLower(verb) {
	case "list":
		c.list += n
	case "watch":
		c.watch += n
	case "get":
		c.get += n
	case "create", "post":
		c.create += n
	case "update", "put":
		c.update += n
	case "patch", "apply":
		c.patch += n
	case "delete":
		c.delete += n
	}
}

// gpusliceKinds are the resources gpuslice reads and writes.
var gpusliceKinds = map[string]bool{
	"namespaces": true, "configmaps": true, "deviceclasses": true, "validatingadmissionpolicies": true, "validatingadmissionpolicybindings": true,
	"clusterroles": true, "resourcequotas": true, "rolebindings": true, "resourceclaimtemplates": true, "persistentvolumeclaims": true,
	"services": true, "deployments": true, "statefulsets": true, "jobs": true, "pods": true, "resourceclaims": true,
	"resourceslices": true, "limitranges": true, "events": true,
}

// serverCounts reads apiserver_request_total for gpuslice's kinds. A watch
// is counted when it ends: the provider's end with its process.
func serverCounts(b *testing.B, c *cluster.Cluster) counts {
	b.Helper()
	time.Sleep(time.Second) // let ended watches be counted
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAData)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest(http.MethodGet, c.Host+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatalf("read the API server's metrics: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatalf("parse the API server's metrics: %v", err)
	}
	var out counts
	fam := families["apiserver_request_total"]
	if fam == nil {
		b.Fatal("the API server reports no apiserver_request_total")
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if gpusliceKinds[labels["resource"]] {
			out.add(labels["verb"], int64(m.GetCounter().GetValue()))
		}
	}
	return out
}

func logSize(path string) int64 {
	if info, err := os.Stat(path); err == nil {
		return info.Size()
	}
	return 0
}

var (
	requestsLine = regexp.MustCompile(`gpuslice API requests`)
	runField     = regexp.MustCompile(`\brun=(\S+)`)
	verbField    = regexp.MustCompile(`\b(list|watch|get|create|update|patch|delete)=(\d+)`)
)

// providerCounts sums, over the provider runs logged after offset, the
// last counts each logged (they are cumulative per run).
func providerCounts(b *testing.B, path string, offset int64) counts {
	b.Helper()
	last := map[string]counts{}
	requestLines(b, path, offset, func(line string) {
		run := runField.FindStringSubmatch(line)
		if run == nil {
			return
		}
		var c counts
		for _, m := range verbField.FindAllStringSubmatch(line, -1) {
			n, _ := strconv.ParseInt(m[2], 10, 64)
			c.add(m[1], n)
		}
		if c.total() >= last[run[1]].total() {
			last[run[1]] = c
		}
	})
	if len(last) == 0 {
		b.Fatalf("no request counts in the provider's debug log %s", path)
	}
	var sum counts
	for _, c := range last {
		sum = sum.add2(c)
	}
	return sum
}

// requestLines calls f with each "gpuslice API requests" line of the
// provider's debug log after offset.
func requestLines(b *testing.B, path string, offset int64, f func(line string)) {
	b.Helper()
	file, err := os.Open(path)
	if err != nil {
		b.Fatalf("the provider's debug log: %v", err)
	}
	defer file.Close()
	if _, err := file.Seek(offset, 0); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); requestsLine.MatchString(line) {
			f(line)
		}
	}
}

func (c counts) add2(o counts) counts {
	return counts{c.list + o.list, c.watch + o.watch, c.get + o.get, c.create + o.create, c.update + o.update, c.patch + o.patch, c.delete + o.delete}
}
