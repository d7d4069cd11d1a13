package shim_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/testenv"
	"github.com/gpuslice/gpuslice/nodeplugin/shim"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

const (
	GiB   = shimtest.GiB
	MiB   = shimtest.MiB
	slice = 8 * GiB // a 25 % package of a V100-32GB
)

func TestMain(m *testing.M) {
	code := m.Run()
	shimtest.Cleanup()
	os.Exit(code)
}

// The Go names the node plugin uses are the ones the library reads.
func TestConstantsMatchHeader(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(shimtest.SourceDir(), "include", "gpuslice.h"))
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^#define (GPUSLICE_\w+) (.+)$`).FindAllStringSubmatch(string(src), -1) {
		defs[m[1]] = strings.Trim(strings.TrimSpace(m[2]), `"`)
	}
	for name, want := range map[string]string{
		"GPUSLICE_ENV_MEMORY_LIMIT":          contract.EnvMemoryLimit,
		"GPUSLICE_ENV_COMPUTE_SHARE":         contract.EnvComputeShare,
		"GPUSLICE_ENV_ACCOUNTING_DIR":        contract.EnvAccountingDir,
		"GPUSLICE_ENV_COMPUTE_BURST":         contract.EnvComputeBurst,
		"GPUSLICE_ENV_COMPUTE_WINDOW_MS":     contract.EnvComputeWindowMS,
		"GPUSLICE_ENV_CONTEXT_OVERHEAD":      contract.EnvContextOverhead,
		"GPUSLICE_ENV_DEBUG":                 contract.EnvDebug,
		"GPUSLICE_CONTAINER_LIBRARY":         contract.ContainerLibraryPath,
		"GPUSLICE_CONTAINER_PRELOAD":         contract.ContainerPreloadPath,
		"GPUSLICE_CONTAINER_ACCOUNTING_DIR":  contract.ContainerAccountingDir,
		"GPUSLICE_REGION_FILE":               contract.RegionFile,
		"GPUSLICE_LIMITS_FILE":               contract.LimitsFile,
		"GPUSLICE_DEFAULT_CONTEXT_OVERHEAD":  strconv.Itoa(shim.DefaultContextOverhead) + "ULL",
		"GPUSLICE_DEFAULT_COMPUTE_WINDOW_MS": strconv.Itoa(shim.DefaultComputeWindowMS) + "u",
	} {
		if defs[name] != want {
			t.Errorf("%s: gpuslice.h has %q, package shim %q", name, defs[name], want)
		}
	}
	if defs["GPUSLICE_CONTAINER_LIMITS"] != `GPUSLICE_CONTAINER_ACCOUNTING_DIR "/" GPUSLICE_LIMITS_FILE` ||
		contract.ContainerLimitsPath != contract.ContainerAccountingDir+"/"+contract.LimitsFile {
		t.Errorf("GPUSLICE_CONTAINER_LIMITS is %q, package contract's %q", defs["GPUSLICE_CONTAINER_LIMITS"], contract.ContainerLimitsPath)
	}
}

func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// field returns the number after key= on the line starting with prefix.
func field(t *testing.T, out, prefix, key string) uint64 {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, prefix+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, key+"="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("%s %s: %v", prefix, key, err)
				}
				return n
			}
		}
	}
	t.Fatalf("no %s %s= in:\n%s", prefix, key, out)
	return 0
}

// An 8 GiB slice looks like an 8 GiB GPU to CUDA and NVML; without the
// library the simulated device shows its 32 GiB.
func TestReportsTheSlice(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	out := run(t, e.Command(true, "gs_probe", "info"))
	for _, c := range []struct{ prefix, key string }{
		{"cuMemGetInfo_v2", "total"}, {"cuDeviceTotalMem_v2", "total"},
		{"nvmlDeviceGetMemoryInfo", "total"}, {"nvmlDeviceGetMemoryInfo_v2", "total"},
	} {
		if got := field(t, out, c.prefix, c.key); got != slice {
			t.Errorf("%s %s = %d, want %d", c.prefix, c.key, got, uint64(slice))
		}
	}
	if got := field(t, out, "cuMemGetInfo_v2", "free"); got != slice-shimtest.ContextBytes {
		t.Errorf("free = %d, want the slice less the context (%d)", got, slice-shimtest.ContextBytes)
	}
	if got := field(t, out, "nvmlDeviceGetMemoryInfo_v2", "used"); got != shimtest.ContextBytes {
		t.Errorf("NVML used = %d, want the claim's use %d", got, shimtest.ContextBytes)
	}

	smi := run(t, e.Command(true, "gpuslice-smi"))
	t.Logf("gpuslice-smi in the container:\n%s", smi)
	if !strings.Contains(smi, "/   8192MiB") {
		t.Errorf("gpuslice-smi does not show 8192MiB:\n%s", smi)
	}
	if bare := run(t, e.Command(false, "gpuslice-smi")); !strings.Contains(bare, "/  32768MiB") {
		t.Errorf("without the library the simulated GPU should show 32768MiB:\n%s", bare)
	}
}

// Every allocation path, reached every way a program finds the driver.
func TestAllocationPaths(t *testing.T) {
	for _, mode := range []string{"link", "dlsym", "proc", "proc11", "ptsz", "fork"} {
		t.Run(mode, func(t *testing.T) {
			e := shimtest.NewEnv(t, slice)
			prog := "gs_probe"
			if mode == "link" {
				prog = "gs_linked"
			}
			out, err := e.Command(true, prog, "paths", mode).CombinedOutput()
			passes := strings.Count(string(out), "PASS ")
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "FAIL ") || strings.HasPrefix(line, "gs_probe:") {
					t.Error(line)
				}
			}
			if err != nil || passes < 30 {
				t.Errorf("%s paths %s: %v, %d checks passed\n%s", prog, mode, err, passes, out)
			}
		})
	}
	// the same checks without the library must fail: they test the library
	t.Run("without-library", func(t *testing.T) {
		e := shimtest.NewEnv(t, slice)
		out, err := e.Command(false, "gs_probe", "paths", "dlsym").CombinedOutput()
		if err == nil || strings.Count(string(out), "FAIL ") < 10 {
			t.Errorf("without the library the checks passed:\n%s", out)
		}
	})
}

// cuGetProcAddress may hand out an address that is no exported symbol (an
// internal entry point, or a variant newer than the library). For a CUDA
// version whose variants the library knows, it still wraps it; past that, an
// allocator is refused rather than let through unaccounted.
func TestGetProcAddressUnexportedVariant(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	for _, c := range []struct {
		preload, unexported bool
		version             string
		want                string
	}{
		{true, false, "13050", "getproc rc=0 status=0 found=1\nalloc-whole-slice rc=2"},
		{true, true, "12080", "getproc rc=0 status=0 found=1\nalloc-whole-slice rc=2"},
		{true, true, "13050", "getproc rc=500 status=1 found=0"},
		{false, true, "13050", "getproc rc=0 status=0 found=1\nalloc-whole-slice rc=0"},
	} {
		cmd := e.Command(c.preload, "gs_probe", "getproc", "cuMemAlloc", c.version)
		if c.unexported {
			cmd.Env = append(cmd.Env, "FAKEGPU_PROC_UNEXPORTED=1")
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %s", err, stderr.String())
		}
		if got := strings.TrimSpace(stdout.String()); got != c.want {
			t.Errorf("library %v, unexported %v, CUDA %s: got %q, want %q (%s)", c.preload, c.unexported, c.version, got, c.want, stderr.String())
		}
	}
}

// The library wraps dlsym; a library that chains to the next definition with
// dlsym(RTLD_NEXT, ...) must still get the one after itself.
func TestDlsymNextKeepsItsMeaning(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	for _, preload := range []bool{false, true} {
		if out := strings.TrimSpace(run(t, e.Command(preload, "gs_next"))); out != "11" {
			t.Errorf("interposer chain (library preloaded: %v) printed %s, want 11", preload, out)
		}
	}
}

// A forked worker is limited by the same budget, and its share comes back
// when it dies without freeing.
func TestForkedWorker(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	out := run(t, e.Command(true, "gs_probe", "forkcheck"))
	if strings.Count(out, "PASS ") != 5 {
		t.Errorf("forkcheck:\n%s", out)
	}
}

// The library is loaded by /etc/ld.so.preload, with the environment (as the
// CDI spec sets it), without it (an ssh or su session that dropped it), and
// with GPUSLICE_ACCOUNTING_DIR pointing elsewhere: where the container's
// limits file exists, it and the container's region are the ones used.
func TestPreloadFile(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	if _, err := exec.LookPath("unshare"); err != nil {
		testenv.Unavailable(t, "unshare not found (util-linux): cannot try /etc/ld.so.preload without changing this machine's /etc")
	}
	etc := t.TempDir()
	if err := os.WriteFile(filepath.Join(etc, "ld.so.preload"), []byte(e.Library()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cache, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		os.WriteFile(filepath.Join(etc, "ld.so.cache"), cache, 0o644)
	}
	probe := filepath.Join(e.Bin, "gs_probe")
	// a directory a tenant made, with limits of its own choosing
	own := shimtest.NewEnv(t, 32*GiB)
	script := fmt.Sprintf(`set -e
mount --bind %[1]q /etc
mount -t tmpfs none /run
mkdir /run/gpuslice
mount --bind %[2]q /run/gpuslice
ls / >/dev/null
test ! -e %[2]q/%[3]s || { echo "a process without CUDA touched the region"; exit 1; }
echo "== with the environment"
%[4]q info
%[5]q
echo "== without it"
env -u GPUSLICE_MEMORY_LIMIT -u GPUSLICE_ACCOUNTING_DIR -u GPUSLICE_CONTEXT_OVERHEAD %[4]q info
echo "== with a directory of its own"
env -u GPUSLICE_MEMORY_LIMIT GPUSLICE_ACCOUNTING_DIR=%[6]q %[4]q info
`, etc, e.AccountingDir, contract.RegionFile, probe, filepath.Join(e.Bin, "gpuslice-smi"), own.AccountingDir)
	var out []byte
	var err error
	for _, args := range [][]string{{"--mount"}, {"--mount", "--map-root-user"}} {
		cmd := exec.Command("unshare", append(args, "sh", "-c", script)...)
		cmd.Env = e.Environ(false)
		out, err = cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "unshare:") {
			break
		}
	}
	if err != nil && strings.Contains(string(out), "unshare:") {
		testenv.Unavailable(t, "this machine does not allow a private mount namespace (%s); /etc/ld.so.preload is untested here", strings.TrimSpace(string(out)))
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
	with, without, _ := strings.Cut(string(out), "== without it")
	without, ownDir, _ := strings.Cut(without, "== with a directory of its own")
	if got := field(t, with, "cuMemGetInfo_v2", "total"); got != slice {
		t.Errorf("with /etc/ld.so.preload: total %d, want %d", got, uint64(slice))
	}
	if !strings.Contains(with, "/   8192MiB") {
		t.Errorf("gpuslice-smi under /etc/ld.so.preload:\n%s", with)
	}
	if got := field(t, without, "cuMemGetInfo_v2", "total"); got != slice {
		t.Errorf("without the environment: total %d, want the limits file's %d", got, uint64(slice))
	}
	if got := field(t, ownDir, "cuMemGetInfo_v2", "total"); got != slice {
		t.Errorf("%s pointing at a directory with 32 GiB limits: total %d, want the container's %d", contract.EnvAccountingDir, got, uint64(slice))
	}
	if _, err := os.Stat(own.Region()); err == nil {
		t.Errorf("the library used the region in %s, not the container's", contract.EnvAccountingDir)
	}
}
