// Package shimtest builds libgpuslice.so, the fake driver and the C test
// programs for the tests of package shim and package accounting, and runs
// those programs the way a container of a claim would.
package shimtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/internal/testenv"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

var (
	once     sync.Once
	built    string
	buildErr error
)

// SourceDir is nodeplugin/shim: found from this file's path, or (when built
// with -trimpath) from the test's working directory, a package directory
// inside it.
func SourceDir() string {
	isShim := func(d string) bool {
		_, err := os.Stat(filepath.Join(d, "include", "gpuslice.h"))
		return err == nil
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if d := filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..")); isShim(d) {
			return d
		}
	}
	d, _ := os.Getwd()
	for ; d != filepath.Dir(d); d = filepath.Dir(d) {
		if isShim(d) {
			return d
		}
	}
	return "nodeplugin/shim (not found from the working directory)"
}

// Build compiles everything once per test binary into a temporary directory
// and returns it. Without gcc or make the test is skipped, except under
// CI=true, where that is a failure.
func Build(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		for _, tool := range []string{"gcc", "make"} {
			if _, err := exec.LookPath(tool); err != nil {
				buildErr = fmt.Errorf("%s not found: install it to build the shim (make -C %s)", tool, SourceDir())
				return
			}
		}
		dir, err := os.MkdirTemp("", "gpuslice-shim-")
		if err != nil {
			buildErr = err
			return
		}
		out, err := exec.Command("make", "-s", "-C", SourceDir(), "OUT="+dir, "-j2").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("make -C %s: %v\n%s", SourceDir(), err, out)
			os.RemoveAll(dir)
			return
		}
		built = dir
	})
	if buildErr != nil {
		// Only a missing compiler is the machine's fault; a compile error is ours.
		if !strings.Contains(buildErr.Error(), "not found") {
			t.Fatal(buildErr)
		}
		testenv.Unavailable(t, "%v", buildErr)
	}
	return built
}

// Cleanup removes what Build made; call it from TestMain.
func Cleanup() {
	if built != "" {
		os.RemoveAll(built)
	}
}

// GiB and MiB in bytes.
const (
	MiB = 1 << 20
	GiB = 1 << 30
	// ContextBytes is what the simulated driver spends per context and what
	// the tests tell the library to charge for one.
	ContextBytes = 300 * MiB
)

// Env is one claim on one simulated GPU.
type Env struct {
	Bin           string // the build directory
	AccountingDir string // the claim's directory
	FakeState     string // the simulated GPU's state file
	Vars          []string
}

// NewEnv returns a claim with the given memory limit on a fresh simulated
// GPU: its limits file written as the node plugin writes it (compute share
// 100 %, no burst, the default window), and the limit in the environment too,
// as the claim's CDI spec sets it. A limit of 0 writes no limits file (a
// process without the library).
func NewEnv(t testing.TB, limit uint64) *Env {
	e := &Env{
		Bin:           Build(t),
		AccountingDir: t.TempDir(),
		FakeState:     filepath.Join(t.TempDir(), "fakegpu"),
		Vars: []string{
			"GPUSLICE_MEMORY_LIMIT=" + strconv.FormatUint(limit, 10),
			"GPUSLICE_CONTEXT_OVERHEAD=" + strconv.Itoa(ContextBytes),
		},
	}
	if limit > 0 {
		e.WriteLimits(t, Limits(limit))
	}
	return e
}

// Limits are the limits the node plugin writes for a claim of limit bytes.
func Limits(limit uint64) accounting.Limits {
	return accounting.Limits{MemoryLimit: limit, ComputeShare: 100, ComputeWindow: 100 * time.Millisecond,
		SamplePeriod: 200 * time.Millisecond, ContextOverhead: ContextBytes}
}

// WriteLimits (re)writes the claim's limits file.
func (e *Env) WriteLimits(t testing.TB, l accounting.Limits) {
	t.Helper()
	if err := accounting.WriteLimits(e.LimitsFile(), l); err != nil {
		t.Fatal(err)
	}
}

// LimitsFile is the claim's limits file.
func (e *Env) LimitsFile() string { return filepath.Join(e.AccountingDir, accounting.LimitsFile) }

// Region is the claim's region file.
func (e *Env) Region() string { return filepath.Join(e.AccountingDir, "gpuslice.region") }

// Library is the built libgpuslice.so.
func (e *Env) Library() string { return filepath.Join(e.Bin, "libgpuslice.so") }

// Environ is the environment of a process of the claim; with preload, the
// library is in LD_PRELOAD.
func (e *Env) Environ(preload bool, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GPUSLICE_") || strings.HasPrefix(k, "FAKEGPU_") || k == "LD_PRELOAD" ||
			k == "LD_LIBRARY_PATH" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"LD_LIBRARY_PATH="+filepath.Join(e.Bin, "fake"),
		"FAKEGPU_STATE="+e.FakeState,
		"FAKEGPU_CONTEXT_BYTES="+strconv.Itoa(ContextBytes),
		"GPUSLICE_ACCOUNTING_DIR="+e.AccountingDir)
	env = append(env, e.Vars...)
	if preload {
		env = append(env, "LD_PRELOAD="+e.Library())
	}
	return append(env, extra...)
}

// Command runs one of the built programs (gs_probe, gs_linked,
// gpuslice-smi) as a process of the claim.
func (e *Env) Command(preload bool, prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(e.Bin, prog), args...)
	cmd.Env = e.Environ(preload)
	return cmd
}
