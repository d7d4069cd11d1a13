package gpuproof_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/internal/testenv"
)

// line is one verdict of the report: PASS, FAIL or SKIP, under a section.
type line struct {
	section, status, name, detail string
}

type report struct {
	text  string
	lines []line
}

func parse(text string) report {
	r := report{text: text}
	section := ""
	for _, l := range strings.Split(text, "\n") {
		if s, ok := strings.CutPrefix(l, "== "); ok {
			section = s
			continue
		}
		for _, st := range []string{"PASS", "FAIL", "SKIP"} {
			if rest, ok := strings.CutPrefix(l, st+"  "); ok {
				name, detail, _ := strings.Cut(rest, ": ")
				r.lines = append(r.lines, line{section, st, name, detail})
			}
		}
	}
	return r
}

// find returns the verdicts named name in sections starting with section.
func (r report) find(section, name string) []line {
	var out []line
	for _, l := range r.lines {
		if strings.HasPrefix(l.section, section) && l.name == name {
			out = append(out, l)
		}
	}
	return out
}

// prerequisites skips (fails in CI) a test whose tools are missing: make
// gpu-proof needs gcc, make and python3.
func prerequisites(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, "%s not found: make gpu-proof needs gcc, make and python3", tool)
		}
	}
}

// proof runs gpu_proof.py on the simulated driver with the given extra
// arguments and returns its report, as printed, and its exit error.
func proof(t *testing.T, args ...string) (report, error) {
	t.Helper()
	work := t.TempDir()
	file := filepath.Join(work, "report.txt")
	args = append([]string{"gpu_proof.py", "--driver", "simulated", "--work", filepath.Join(work, "w"), "--report", file}, args...)
	return run(t, exec.Command("python3", args...), file)
}

// run runs cmd, a run of the proof writing its report to file, and returns
// the report, as printed, and cmd's exit error.
func run(t *testing.T, cmd *exec.Cmd, file string) (report, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Dir, c.Env = cmd.Dir, cmd.Env
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	t.Logf("%s:\n%s%s", strings.Join(cmd.Args, " "), stdout.String(), stderr.String())
	if ctx.Err() != nil {
		t.Fatalf("the proof did not finish within 6 minutes")
	}
	written, rerr := os.ReadFile(file)
	if rerr != nil {
		t.Fatalf("the report file: %v", rerr)
	}
	printed := stdout.String()
	if _, after, ok := strings.Cut(printed, "gpuslice gpu-proof, "); ok {
		printed = "gpuslice gpu-proof, " + after // make's echo of the command comes first
	}
	if string(written) != printed {
		t.Errorf("the report written to %s differs from the one printed", file)
	}
	return parse(printed), err
}

// checkout copies the repository's files as a fresh clone has them (tracked
// and new files, nothing ignored: no bin/, no tmp/) into a new directory.
func checkout(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", "../..", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		testenv.Unavailable(t, "git ls-files: %v (the test copies the checkout)", err)
	}
	dst := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join("../..", f)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// pathWithoutGo is PATH without any directory holding go, and with gcc,
// make and python3 (linked from where they are) in front: a GPU machine's.
func pathWithoutGo(t *testing.T) string {
	t.Helper()
	tools := t.TempDir()
	// python3 may be a shim (pyenv) that finds the interpreter on PATH
	py, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	if err := os.Symlink(strings.TrimSpace(string(py)), filepath.Join(tools, "python3")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gcc", "make", "env", "git"} {
		if p, err := exec.LookPath(name); err == nil {
			if err := os.Symlink(p, filepath.Join(tools, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	dirs := []string{tools}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "go")); err != nil {
			dirs = append(dirs, d)
		}
	}
	path := strings.Join(dirs, string(os.PathListSeparator))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "go")); err == nil {
			t.Fatalf("go is still in %s", d)
		}
	}
	return path
}

// makeWithoutGo runs make gpu-proof on the simulated driver from a copy of
// the checkout, with Go off the PATH, as on a GPU machine.
func makeWithoutGo(t *testing.T, args ...string) (report, string, error) {
	t.Helper()
	dir := checkout(t)
	file := filepath.Join(t.TempDir(), "report.txt")
	var env []string
	for _, e := range os.Environ() {
		// as from a shell on the GPU machine: no Go, and not inside make
		// test's make (MAKELEVEL would make it print its directories)
		if !strings.HasPrefix(e, "PATH=") && !strings.HasPrefix(e, "GO") && !strings.HasPrefix(e, "MAKE") && !strings.HasPrefix(e, "MFLAGS=") {
			env = append(env, e)
		}
	}
	env = append(env, "PATH="+pathWithoutGo(t))
	cmd := exec.Command("make", append([]string{"gpu-proof", "GPU_PROOF_DRIVER=simulated", "GPU_PROOF_REPORT=" + file}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	probe := exec.Command("make", "-n", "gpu-proof")
	probe.Dir, probe.Env, probe.Stderr = dir, env, &stderr
	if err := probe.Run(); err != nil {
		t.Fatalf("make -n gpu-proof without Go: %v\n%s", err, stderr.String())
	}
	r, err := run(t, cmd, file)
	return r, stderr.String(), err
}

var fraction = regexp.MustCompile(`= ([0-9.]+) of the loop without the shim`)

// The whole proof on the simulated driver: every part that can run without
// a GPU runs and holds (the view is the slice, allocations past it are
// refused on every driver-API path, two processes share one budget, kill -9
// frees a share, launches are paced, discovery reads the GPU through go-nvml
// and the plugin's accounting reports a process without the shim); the parts
// that need a real GPU say so. The timing figures are judged by the proof
// itself against ±5 points on a real GPU; on this shared machine they are
// held to sanity bounds here.
func TestProofOnSimulatedDriver(t *testing.T) {
	testenv.Short(t, "takes about 60 s")
	prerequisites(t, "gcc", "make", "python3", "git")
	r, makeErr, err := makeWithoutGo(t)
	if makeErr != "" {
		t.Errorf("make gpu-proof without Go wrote on stderr before the proof ran (want it quiet): %s", makeErr)
	}
	if !strings.Contains(r.text, "driver: SIMULATED") {
		t.Errorf("the report does not say it ran on the simulated driver")
	}
	timing := map[string]bool{"paced to a 25 % share": true, "paced to a 50 % share": true, "paced to a 30 % share": true,
		"a lone process at 100 % keeps its throughput": true}
	failedOther := false
	for _, l := range r.lines {
		if l.status == "FAIL" && !timing[l.name] {
			t.Errorf("FAIL in %q: %s: %s", l.section, l.name, l.detail)
			failedOther = true
		}
	}
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || failedOther) {
		t.Errorf("gpu_proof.py: %v", err)
	}

	for _, s := range []struct{ pct, mib string }{{"25", "8192"}, {"50", "16384"}} {
		sec := "Slice " + s.pct + " %"
		for _, name := range []string{"slice-check reports the slice", "gpuslice-smi (NVML) reports the slice"} {
			ls := r.find(sec, name)
			if len(ls) != 1 || ls[0].status != "PASS" || !strings.HasPrefix(ls[0].detail, s.mib+" MiB total") {
				t.Errorf("%s: %s: %+v, want PASS with %s MiB", sec, name, ls, s.mib)
			}
		}
		for _, name := range []string{
			"slice-check refuses allocations past the slice",
			"cuMemGetInfo_v2 reports the slice", "cuDeviceTotalMem_v2 reports the slice",
			"nvmlDeviceGetMemoryInfo reports the slice", "nvmlDeviceGetMemoryInfo_v2 reports the slice",
			"cuMemAlloc_v2 allocates up to the slice and is refused past it",
			"cuMemAllocManaged allocates up to the slice and is refused past it",
			"cuMemCreate + cuMemMap (VMM) allocates up to the slice and is refused past it",
			"cuMemAllocAsync (stream-ordered, default pool) allocates up to the slice and is refused past it",
			"cuMemAllocFromPoolAsync (a created pool) allocates up to the slice and is refused past it",
			"two processes share one claim's budget (driver API)",
			"kill -9 of a process mid-allocation frees its share (driver API)",
		} {
			if ls := r.find(sec, name); len(ls) != 1 || ls[0].status != "PASS" {
				t.Errorf("%s: %s: %+v, want one PASS", sec, name, ls)
			}
		}
		for _, name := range []string{
			"nvidia-smi reports the slice", "nvidia-ml-py reports the slice", "torch.cuda.mem_get_info() reports the slice",
			"PyTorch's caching allocator is refused past the slice with a torch.OutOfMemoryError it catches",
			"PyTorch with expandable_segments:True (VMM) is refused past the slice with a torch.OutOfMemoryError it catches",
			"PyTorch with backend:cudaMallocAsync is refused past the slice with a torch.OutOfMemoryError it catches",
			"CuPy's memory pool is refused past the slice with cupy's OutOfMemoryError",
			"cuBLAS's workspace in a first matmul on a full slice",
			"two processes share one claim's budget, kill -9 frees a share (PyTorch)",
		} {
			if ls := r.find(sec, name); len(ls) != 1 || ls[0].status != "SKIP" || !strings.HasPrefix(ls[0].detail, "skipped: no GPU") {
				t.Errorf("%s: %s: %+v, want one SKIP saying skipped: no GPU", sec, name, ls)
			}
		}
	}

	share := map[string]float64{}
	for _, name := range []string{"paced to a 25 % share", "paced to a 50 % share", "a lone process at 100 % keeps its throughput"} {
		ls := r.find("Compute share", name)
		if len(ls) != 1 {
			t.Fatalf("compute share: %q: %+v", name, ls)
		}
		m := fraction.FindStringSubmatch(ls[0].detail)
		if m == nil {
			t.Fatalf("compute share: no fraction in %q", ls[0].detail)
		}
		share[name], _ = strconv.ParseFloat(m[1], 64)
	}
	p25, p50, p100 := share["paced to a 25 % share"], share["paced to a 50 % share"], share["a lone process at 100 % keeps its throughput"]
	if p25 < 0.10 || p25 > 0.40 || p50 < 0.30 || p50 > 0.70 || p100 < 0.5 || !(p25 < p50 && p50 < p100) {
		t.Errorf("compute share: 25 %% got %.3f, 50 %% %.3f, 100 %% %.3f of the unpaced loop: not paced toward the shares", p25, p50, p100)
	}
	if ls := r.find("Compute share", "PyTorch float16 4096x4096 matmul loop paced to its share"); len(ls) != 1 || ls[0].status != "SKIP" {
		t.Errorf("the PyTorch matmul loop: %+v, want skipped: no GPU", ls)
	}

	for _, name := range []string{"cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB", "cuLaunchKernel of an empty kernel"} {
		if ls := r.find("Overhead", name); len(ls) != 1 || ls[0].status != "PASS" || !strings.Contains(ls[0].detail, "ns with it") {
			t.Errorf("overhead: %s: %+v", name, ls)
		}
	}

	if !strings.Contains(r.text, "GPU 0: Tesla V100-PCIE-32GB, 32768 MiB (nvml_v2), GPU-5f0c0dd8-6c5e-4c0e-9b6e-0000000000a1, compute capability 7.0 (Volta), MIG mode not supported") {
		t.Errorf("discovery: the report lacks the GPU's line")
	}
	for _, name := range []string{"discovery finds the GPU", "the model is the driver's device name",
		"UUID, memory and compute capability are read", "the memory is what allocations can get, as the node plugin reads it"} {
		if ls := r.find("Discovery", name); len(ls) != 1 || ls[0].status != "PASS" {
			t.Errorf("discovery: %s: %+v", name, ls)
		}
	}
	if ls := r.find("Bypass", "a process without the shim is listed by NVML with its memory"); len(ls) != 1 || ls[0].status != "PASS" ||
		!strings.Contains(ls[0].detail, "NVML's processes 0 -> 1") {
		t.Errorf("bypass detection: %+v", ls)
	}
	if ls := r.find("Bypass", "its memory is no longer listed once it exits"); len(ls) != 1 || ls[0].status != "PASS" {
		t.Errorf("bypass detection after exit: %+v", ls)
	}
	for _, name := range []string{"a process of the claim past its limit without the shim is stopped", "the claim's process with the shim is untouched",
		"the observation reaches the claim's limits file", "a process with the shim filling its slice is not stopped"} {
		if ls := r.find("Enforcer", name); len(ls) != 1 || ls[0].status != "PASS" {
			t.Errorf("enforcer: %s: %+v, want one PASS", name, ls)
		}
	}
	// the production path: the tests run as root (testenv fails in CI
	// where they do not), so the claims ran in containers
	if os.Geteuid() == 0 {
		if !strings.Contains(r.text, "loaded by a bind-mounted /etc/ld.so.preload") {
			t.Errorf("as root, the report does not say the claims ran in containers")
		}
		for _, name := range []string{"the shim is loaded through /etc/ld.so.preload, with nothing in LD_PRELOAD",
			"the limits file cannot be written, replaced or removed in the container",
			"a limits file of the tenant's own, named in GPUSLICE_ACCOUNTING_DIR, is not the claim's"} {
			if ls := r.find("The production path", name); len(ls) != 1 || ls[0].status != "PASS" {
				t.Errorf("production path: %s: %+v, want one PASS", name, ls)
			}
		}
	} else {
		testenv.Unavailable(t, "not root: the production path (mount namespaces) was not proved")
	}
	for _, c := range []struct{ section, name string }{
		{"The production path", "a process raising GPUSLICE_MEMORY_LIMIT gets the limits file's"},
		{"Any-size slice (consumed capacity): 12032 MiB of 32768 MiB, compute 30 %", "cuMemGetInfo_v2 and NVML report the any-size slice"},
		{"Any-size", "cuMemAlloc_v2 allocates up to the any-size slice and is refused past it"},
		{"Any-size", "the GPU is idle before the compute-share run"},
		{"Time-sliced pair", "the second claim sees the whole GPU"},
		{"Time-sliced pair", "the second claim sees the first's memory on the GPU"},
		{"Time-sliced pair", "nothing of the shim in a time-sliced claim's container"},
		{"Time-sliced pair", "the first claim's process runs on beside it"},
		{"Compute share", "the GPU is idle before the compute-share run"},
		{"MIG", "NVML in the MIG claim's container shows MIG mode and its instance"},
		{"MIG", "the MIG claim's CUDA sees its instance"},
		{"MIG", "allocations stop at the instance, without the shim"},
		{"MIG", "nothing of the shim in a MIG claim's container"},
	} {
		if ls := r.find(c.section, c.name); len(ls) != 1 || ls[0].status != "PASS" {
			t.Errorf("%s: %s: %+v, want one PASS", c.section, c.name, ls)
		}
	}
	if !strings.Contains(r.text, "these checks run on a simulated A100 instance") {
		t.Errorf("the report does not say MIG ran on a simulated instance")
	}
	// every verdict names the GPU, driver and CUDA version it was measured on
	for _, l := range r.lines {
		if l.status != "SKIP" && !strings.HasSuffix(l.detail, "[SIMULATED Tesla V100-PCIE-32GB, driver 580.95.05, CUDA 13.0]") {
			t.Errorf("%s %q does not end with the GPU, driver and CUDA version: %q", l.status, l.name, l.detail)
		}
	}
	if !regexp.MustCompile(`killed \(exit -9\) \d+ ms after it said it held the memory`).MatchString(r.text) {
		t.Errorf("the report does not say how long the enforcer took")
	}
}

// The proof fails when the shim does not enforce: with an inert library
// preloaded in its place, the view shows the whole simulated GPU, an
// allocation goes past the slice and a second process gets more than the
// budget leaves.
func TestProofFailsWithoutEnforcement(t *testing.T) {
	testenv.Short(t, "takes about 20 s")
	prerequisites(t, "gcc", "make", "python3")
	dir := t.TempDir()
	src := filepath.Join(dir, "inert.c")
	if err := os.WriteFile(src, []byte("int gpuslice_inert;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inert := filepath.Join(dir, "libinert.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", inert, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	r, err := proof(t, "--shim", inert, "--parts", "view,memory,production", "--slices", "25")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("gpu_proof.py with an inert library: %v, want exit status 1", err)
	}
	for _, name := range []string{
		"slice-check reports the slice", "gpuslice-smi (NVML) reports the slice", "cuMemGetInfo_v2 reports the slice",
		"cuMemAlloc_v2 allocates up to the slice and is refused past it",
		"cuMemAllocFromPoolAsync (a created pool) allocates up to the slice and is refused past it",
		"two processes share one claim's budget (driver API)",
		"kill -9 of a process mid-allocation frees its share (driver API)",
	} {
		if ls := r.find("Slice 25 %", name); len(ls) != 1 || ls[0].status != "FAIL" {
			t.Errorf("%s without enforcement: %+v, want FAIL", name, ls)
		}
	}
}

// The parts that only run on a GPU machine are at least valid Python, and
// their command line parses, here where torch is absent.
func TestPythonPartsCompile(t *testing.T) {
	prerequisites(t, "python3")
	code := "import sys\nfor f in sys.argv[1:]:\n    compile(open(f).read(), f, 'exec')\n"
	if out, err := exec.Command("python3", "-c", code, "gpu_parts.py", "gpu_proof.py").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, script := range []string{"gpu_parts.py", "gpu_proof.py"} {
		out, err := exec.Command("python3", script, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "usage:") {
			t.Errorf("python3 %s --help: %v\n%s", script, err, out)
		}
	}
}
