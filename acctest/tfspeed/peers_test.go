package tfspeed

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/gobuild"
)

// peerOps are what each tool does, in order, on a control plane of its own:
// create the objects, plan with nothing changed, and update every
// workload.
var peerOps = []string{"create", "no-change plan", "update all"}

// peerRow is one tool's figures at one size, by operation.
type peerRow struct {
	tool    string
	ops     map[string]took
	objects int
}

// BenchmarkPeers measures gpuslice against the tools GitOps teams apply
// the same objects with, in the same run, on the same machine: Flux's
// server-side-apply engine (fluxcd/pkg/ssa, as kustomize-controller runs
// it: a staged apply that dry-runs every object and applies those that
// differ, 16 workers, no client throttling; bin/fluxssa from tools/peers)
// and kubectl (server-side apply; `kubectl diff --server-side` as its
// no-change plan). Each tool gets a fresh control plane and the objects
// gpuslice renders from the stack (2 packages, 10 quotas, N workloads),
// written as YAML for the peers. For each: wall-clock time, CPU time and
// peak RSS (the kernel's, of the process and the children it waited for);
// for the no-change plan, those of the run of median time of three.
//
//	make bench-peers    (GPUSLICE_BENCH_SIZES=200 for one size)
func BenchmarkPeers(b *testing.B) {
	sizes := benchSizes(b, []int{200, 1000})
	cli := buildCLI(b)
	bin := cluster.FindBinDir()
	flux, kubectl := filepath.Join(bin, "fluxssa"), filepath.Join(bin, "kubectl")
	for _, p := range []string{flux, kubectl} {
		if _, err := os.Stat(p); err != nil {
			b.Fatalf("%s: %v (make bench-peers builds it: tools/build.sh kubectl fluxssa)", p, err)
		}
	}
	baseline, commit := baselineCLI(b)
	evictFromPageCache(b, cli, baseline, flux, kubectl)
	results := map[int][]peerRow{}
	for b.Loop() {
		for _, n := range sizes {
			results[n] = []peerRow{measureGpuslice(b, "gpuslice", cli, n)}
			if baseline != "" {
				results[n] = append(results[n], measureGpuslice(b, "gpuslice "+commit, baseline, n))
			}
			results[n] = append(results[n],
				measurePeer(b, n, "Flux ssa", func(c *cluster.Cluster, file string) []string {
					return []string{flux, "-kubeconfig", c.KubeconfigPath, "-workers", "16", "-f", file}
				}, nil),
				measurePeer(b, n, "kubectl", func(c *cluster.Cluster, file string) []string {
					return []string{kubectl, "--kubeconfig", c.KubeconfigPath, "apply", "--server-side", "--field-manager", "kubectl-bench", "-f", file}
				}, func(c *cluster.Cluster, file string) []string {
					return []string{kubectl, "--kubeconfig", c.KubeconfigPath, "diff", "--server-side", "--field-manager", "kubectl-bench", "-f", file}
				}),
			)
			b.Logf("%d workloads done", n)
		}
	}
	fmt.Print(peerTable(sizes, results))
}

// evictFromPageCache drops the binaries' pages from the page cache, so
// that each tool's first run reads its binary as any program is read, and
// every tool's binary is held the same way. A binary the Go linker has
// just written stays in the page cache in the large pieces it was written
// in, which Linux maps whole into a process that touches any page of one:
// a CLI fresh from the build measured 5 MiB more file-backed memory than
// the same file evicted (or copied) and read again.
func evictFromPageCache(b *testing.B, paths ...string) {
	b.Helper()
	for _, p := range paths {
		if p == "" {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		// Pages still dirty are not dropped: write them first.
		err = f.Sync()
		if err == nil {
			err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		}
		f.Close()
		if err != nil {
			b.Fatalf("drop %s from the page cache: %v", p, err)
		}
	}
}

func benchSizes(b *testing.B, def []int) []int {
	s := os.Getenv("GPUSLICE_BENCH_SIZES")
	if s == "" {
		return def
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("GPUSLICE_BENCH_SIZES=%q: %v", s, err)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// baselineCLI builds the CLI of the commit GPUSLICE_BENCH_BASELINE names
// (make bench-peers names one) from a worktree of its own, to measure
// today's code against it in the same run; "" when none is named.
func baselineCLI(b *testing.B) (path, commit string) {
	commit = os.Getenv("GPUSLICE_BENCH_BASELINE")
	if commit == "" {
		return "", ""
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("worktree", "add", "--detach", src, commit)
	defer git("worktree", "remove", "--force", src)
	path = filepath.Join(dir, "gpuslice")
	if out, err := cliBuild(src, path).CombinedOutput(); err != nil {
		// Until 2026-12-07 the CLI linked go-nvml, which needs cgo (the
		// default baseline, a8f5d7e, does): build it as it was released.
		withCgo := cliBuild(src, path)
		withCgo.Env = append(gobuild.Env(), "CGO_ENABLED=1")
		if cgoOut, cgoErr := withCgo.CombinedOutput(); cgoErr != nil {
			b.Fatalf("build the CLI of %s: %v\n%s\nwith cgo: %v\n%s", commit, err, out, cgoErr, cgoOut)
		}
		b.Logf("the CLI of %s needs cgo: built with it, dynamically linked", commit)
	}
	return path, commit
}

func measureGpuslice(b *testing.B, tool, gpuslice string, n int) peerRow {
	c := startCluster(b)
	defer c.Stop()
	dir := b.TempDir()
	cli := func(allowed []int, args ...string) took {
		return run(b, dir, nil, allowed, gpuslice, append(args, "--kubeconfig", c.KubeconfigPath)...)
	}
	r := peerRow{tool: tool, ops: map[string]took{}}
	if err := configuration(dir, "cli", c.KubeconfigPath, n, "4096"); err != nil {
		b.Fatal(err)
	}
	r.objects = len(renderedObjects(b, dir))
	r.ops["create"] = cli([]int{0}, "apply", "-auto-approve")
	settle(b, c)
	r.ops["no-change plan"] = medianOf(peerPlans, func() took { return cli([]int{0}, "plan", "-detailed-exitcode") })
	if err := configuration(dir, "cli", c.KubeconfigPath, n, "16384"); err != nil {
		b.Fatal(err)
	}
	r.ops["update all"] = cli([]int{0}, "apply", "-auto-approve")
	return r
}

// measurePeer runs a peer on a control plane of its own: apply creates,
// plan (apply again when nil) finds nothing to change, and apply of the
// updated objects updates every workload.
func measurePeer(b *testing.B, n int, tool string, apply, plan func(c *cluster.Cluster, file string) []string) peerRow {
	c := startCluster(b)
	defer c.Stop()
	dir := b.TempDir()
	if plan == nil {
		plan = apply
	}
	r := peerRow{tool: tool, ops: map[string]took{}}
	manifest := func(contextLength string) string {
		if err := configuration(dir, "cli", c.KubeconfigPath, n, contextLength); err != nil {
			b.Fatal(err)
		}
		objs := renderedObjects(b, dir)
		r.objects = len(objs)
		path := filepath.Join(dir, "objects-"+contextLength+".yaml")
		if err := os.WriteFile(path, objs.yaml(), 0o644); err != nil {
			b.Fatal(err)
		}
		return path
	}
	v1 := manifest("4096")
	timed := func(argv []string) took { return run(b, dir, nil, []int{0}, argv[0], argv[1:]...) }
	r.ops["create"] = timed(apply(c, v1))
	settle(b, c)
	r.ops["no-change plan"] = medianOf(peerPlans, func() took { return timed(plan(c, v1)) })
	r.ops["update all"] = timed(apply(c, manifest("16384")))
	return r
}

// peerPlans is how many times each tool's no-change plan runs; the one of
// median time counts, so that one run meeting a busy moment of a shared
// machine (or a garbage collection landing late) does not decide a ratio.
const peerPlans = 3

// medianOf runs f n times and returns the run of median time.
func medianOf(n int, f func() took) took {
	ts := make([]took, n)
	for i := range ts {
		ts[i] = f()
	}
	return median(ts)
}

// manifests are rendered objects as YAML documents.
type manifests [][]byte

func (m manifests) yaml() []byte { return bytes.Join(m, []byte("---\n")) }

// renderedObjects are the objects gpuslice applies for the stack in dir,
// in its apply order (namespaces and cluster-wide objects first).
func renderedObjects(b testing.TB, dir string) manifests {
	b.Helper()
	cfg, diags := hclstack.Load(dir, hclstack.Options{Stack: "peers"})
	if diags.HasErrors() {
		b.Fatalf("load %s: %v", dir, diags)
	}
	objs, err := render.Stack(cfg.Stack)
	if err != nil {
		b.Fatal(err)
	}
	out := make(manifests, 0, len(objs))
	for _, o := range objs {
		data, err := yaml.Marshal(o.MustUnstructured().Object)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

func peerTable(sizes []int, results map[int][]peerRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s, GOMAXPROCS %d, %s\n", runtime.GOOS+"/"+runtime.GOARCH, runtime.GOMAXPROCS(0), time.Now().Format("2006-01-02"))
	b.WriteString("\nEach tool on a control plane of its own, the same objects; wall-clock time, CPU time (user + system), peak RSS (and, of the tool's process, its largest anonymous and file-backed resident memory: file is the binary's own pages).\n\n")
	b.WriteString("| N workloads (objects) | operation | tool | time | CPU | peak RSS | gpuslice ÷ tool: time / CPU / RSS |\n|---|---|---|---|---|---|---|\n")
	for _, n := range sizes {
		rows := results[n]
		ours := gpusliceRow(rows)
		for _, op := range peerOps {
			for _, r := range rows {
				t := r.ops[op]
				ratio := ""
				if r.tool != "gpuslice" {
					o := ours.ops[op]
					ratio = fmt.Sprintf("%.2f× / %.2f× / %.2f×", o.wall.Seconds()/t.wall.Seconds(), o.cpu.Seconds()/t.cpu.Seconds(), float64(o.rss)/float64(t.rss))
				}
				fmt.Fprintf(&b, "| %d (%d) | %s | %s | %s | %s | %s | %s |\n", n, r.objects, op, r.tool, sec(t.wall), sec(t.cpu), rssSplit(t), ratio)
			}
		}
	}
	b.WriteString("\nNo-change plan, anonymous memory (the data, without the binary's pages), gpuslice ÷ tool:\n\n")
	for _, n := range sizes {
		ours := gpusliceRow(results[n]).ops["no-change plan"]
		for _, r := range results[n] {
			if r.tool == "gpuslice" {
				continue
			}
			t := r.ops["no-change plan"]
			fmt.Fprintf(&b, "- %d workloads, %s: %.2f× (%s against %s; binary's pages %s against %s)\n", n, r.tool,
				float64(ours.anon)/float64(t.anon), mib(ours.anon), mib(t.anon), mib(ours.file), mib(t.file))
		}
	}
	if len(sizes) >= 2 {
		lo, hi := sizes[0], sizes[len(sizes)-1]
		b.WriteString("\nPeak RSS of the no-change plan, growth per object between the smallest and largest size:\n\n")
		for i, r := range results[hi] {
			small := results[lo][i]
			per := float64(r.ops["no-change plan"].rss-small.ops["no-change plan"].rss) / float64(r.objects-small.objects)
			fmt.Fprintf(&b, "- %s: %.1f KiB per object\n", r.tool, per/1024)
		}
	}
	return b.String()
}

// gpusliceRow is the row of the CLI built from this checkout.
func gpusliceRow(rows []peerRow) peerRow {
	for _, r := range rows {
		if r.tool == "gpuslice" {
			return r
		}
	}
	return peerRow{}
}

// rssSplit is a command's peak RSS with its process's anonymous and
// file-backed parts.
func rssSplit(t took) string {
	return fmt.Sprintf("%s (anon %d, file %d)", mib(t.rss), t.anon>>20, t.file>>20)
}
