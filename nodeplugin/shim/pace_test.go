package shim_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/internal/testenv"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

// tenant is one claim running kernels flat out on the shared simulated GPU.
type tenant struct {
	kind  string // how it launches: kernel, ex, coop, graph, ptsz
	us    int    // kernel duration
	share int    // 0: no library
	burst bool
}

// runTenants runs the tenants together; each measures its own GPU time over
// [w0, w1] after a common start and returns it as a fraction of that window.
func runTenants(t *testing.T, ts []tenant, w0, w1 time.Duration) ([]float64, error) {
	gpu := shimtest.NewEnv(t, slice).FakeState
	epoch := time.Now().Add(400 * time.Millisecond).UnixNano()
	cmds := make([]*exec.Cmd, len(ts))
	outs := make([]*bytes.Buffer, len(ts))
	for i, tn := range ts {
		e := shimtest.NewEnv(t, slice) // each tenant is its own claim
		e.FakeState = gpu
		e.Vars = append(e.Vars, "GPUSLICE_COMPUTE_SHARE="+strconv.Itoa(max(tn.share, 1)))
		if tn.burst {
			// burst is the plugin's to grant (the limits file); the
			// environment can only turn it off
			l := shimtest.Limits(slice)
			l.Burst = true
			e.WriteLimits(t, l)
			e.Vars = append(e.Vars, "GPUSLICE_COMPUTE_BURST=1")
		}
		cmds[i] = e.Command(tn.share > 0, "gs_probe", "tenant", tn.kind, strconv.Itoa(tn.us), strconv.FormatInt(epoch, 10),
			strconv.FormatInt(w0.Milliseconds(), 10), strconv.FormatInt(w1.Milliseconds(), 10),
			strconv.FormatInt((w1+200*time.Millisecond).Milliseconds(), 10))
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			return nil, err
		}
	}
	shares := make([]float64, len(ts))
	var errs []error
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("tenant %d: %v\n%s", i, err, outs[i]))
		} else if _, err := fmt.Sscanf(outs[i].String(), "share %g", &shares[i]); err != nil {
			errs = append(errs, fmt.Errorf("tenant %d: %q", i, outs[i]))
		}
	}
	return shares, errors.Join(errs...)
}

// Four tenants at 25 %, each launching flat out, with different kernel sizes
// and launch APIs: each gets 25 % ± 5 percentage points over a 10 s window.
func TestComputeShareFourTenants(t *testing.T) {
	testenv.Short(t, "takes 12 s")
	ts := []tenant{{"kernel", 500, 25, false}, {"ex", 1000, 25, false}, {"coop", 2000, 25, false}, {"graph", 4000, 25, false}}
	shares, err := runTenants(t, ts, time.Second, 11*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i, s := range shares {
		err := (s - 0.25) * 100
		worst = math.Max(worst, math.Abs(err))
		t.Logf("tenant %d (%s, %d µs kernels, share 25%%): achieved %.2f%% (error %+.2f pp) over 10 s", i, ts[i].kind, ts[i].us, s*100, err)
	}
	t.Logf("largest error %.2f pp", worst)
	if worst > 5 {
		t.Errorf("a tenant is %.2f pp from its 25%% share", worst)
	}
}

// Without the library the same tenants do not share fairly (so the test above
// measures the pacing, not the simulator); a lone tenant is held to its share
// unless the platform allows bursting.
func TestComputeShareControlsAndBurst(t *testing.T) {
	testenv.Short(t, "takes 3 s")
	// three simulated GPUs side by side
	groups := [][]tenant{
		{{"kernel", 500, 0, false}, {"ex", 1000, 0, false}, {"coop", 2000, 0, false}, {"graph", 4000, 0, false}},
		{{"ptsz", 1000, 25, false}},
		{{"kernel", 1000, 25, true}},
	}
	results := make([][]float64, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = runTenants(t, g, 500*time.Millisecond, 2500*time.Millisecond)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	unpaced, alone, burst := results[0], results[1], results[2]
	var spread float64
	for _, s := range unpaced {
		spread = math.Max(spread, math.Abs(s-0.25)*100)
	}
	t.Logf("without the library: %.1f%% %.1f%% %.1f%% %.1f%%", unpaced[0]*100, unpaced[1]*100, unpaced[2]*100, unpaced[3]*100)
	t.Logf("alone at 25%%: %.2f%%; alone at 25%% with burst: %.2f%%", alone[0]*100, burst[0]*100)
	if spread <= 5 {
		t.Errorf("unpaced tenants already share within %.1f pp: the four-tenant test would prove nothing", spread)
	}
	if math.Abs(alone[0]-0.25) > 0.05 {
		t.Errorf("a lone tenant at 25%% without burst got %.2f%%", alone[0]*100)
	}
	if burst[0] < 0.9 {
		t.Errorf("a lone tenant allowed to burst got %.2f%%, want the idle GPU", burst[0]*100)
	}
}

func splitLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

func parseFloat(line, prefix string, v *float64) {
	if rest, ok := strings.CutPrefix(line, prefix); ok {
		if f, err := strconv.ParseFloat(rest, 64); err == nil {
			*v = f
		}
	}
}
