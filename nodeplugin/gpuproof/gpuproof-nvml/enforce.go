package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/enforce"
)

// claimPod stands for the pod of the claim's processes: the harness's
// processes run in no pod, so the PIDs it names are the claim's.
const claimPod = "gpu-proof"

type killJSON struct {
	Event          string `json:"event"`
	PID            uint32 `json:"pid"`
	UsedBytes      uint64 `json:"usedBytes"`
	GrewBytes      uint64 `json:"grewBytes"`
	ClaimUsedBytes uint64 `json:"claimUsedBytes"`
	LimitBytes     uint64 `json:"limitBytes"`
	SampledUnixNs  int64  `json:"sampledUnixNs"`
	KilledUnixNs   int64  `json:"killedUnixNs"`
	Error          string `json:"error,omitempty"`
}

type doneJSON struct {
	Event        string `json:"event"`
	Samples      int    `json:"samples"`
	SampleMeanNs int64  `json:"sampleMeanNs"`
	SampleMaxNs  int64  `json:"sampleMaxNs"`
}

// enforceClaim runs the enforcer every enforce.Period over one claim whose
// processes are the PIDs read from in, until in closes.
func enforceClaim(lib nvml.Interface, gpus []discovery.GPU, limit uint64, limitsFile string, in io.Reader, out io.Writer) error {
	var mu sync.Mutex
	pids := map[uint32]bool{}
	claim := enforce.Claim{UID: "gpu-proof", Namespace: "gpu-proof", Name: "claim", PodUIDs: []string{claimPod}, LimitsFile: limitsFile}
	var uuids []string
	for _, g := range gpus {
		if !g.MIGEnabled {
			uuids = append(uuids, g.UUID)
			claim.GPUs = append(claim.GPUs, enforce.GPU{UUID: g.UUID, Limit: limit})
		}
	}
	if len(uuids) == 0 {
		return errors.New("enforce: no GPU outside MIG mode")
	}
	enc := json.NewEncoder(out)
	var encMu sync.Mutex
	emit := func(v any) {
		encMu.Lock()
		defer encMu.Unlock()
		enc.Encode(v)
	}
	e := enforce.New(enforce.Config{
		NVML: lib, GPUs: uuids, Claims: func() []enforce.Claim { return []enforce.Claim{claim} },
		PodOf: func(pid uint32) string {
			mu.Lock()
			defer mu.Unlock()
			if pids[pid] {
				return claimPod
			}
			return ""
		},
		OnKill: func(k enforce.Kill) {
			j := killJSON{Event: "kill", PID: k.Process.PID, UsedBytes: k.Process.Used, GrewBytes: k.Process.Grew, ClaimUsedBytes: k.ClaimUsed,
				LimitBytes: k.Limit, SampledUnixNs: k.Sampled.UnixNano(), KilledUnixNs: k.At.UnixNano()}
			if k.Err != nil {
				j.Error = k.Err.Error()
			}
			emit(j)
		},
	})
	defer e.Close()

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	emit(map[string]string{"event": "ready"})
	tick := time.NewTicker(enforce.Period)
	defer tick.Stop()
	var n int
	var total, worst time.Duration
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				mean := time.Duration(0)
				if n > 0 {
					mean = total / time.Duration(n)
				}
				emit(doneJSON{Event: "done", Samples: n, SampleMeanNs: int64(mean), SampleMaxNs: int64(worst)})
				return nil
			}
			f := strings.Fields(l)
			if len(f) != 2 || f[0] != "pid" {
				return fmt.Errorf("enforce: stdin line %q, want \"pid N\"", l)
			}
			pid, err := strconv.ParseUint(f[1], 10, 32)
			if err != nil {
				return fmt.Errorf("enforce: stdin line %q: %w", l, err)
			}
			mu.Lock()
			pids[uint32(pid)] = true
			mu.Unlock()
		case <-tick.C:
			t0 := time.Now()
			e.Sample()
			d := time.Since(t0)
			n++
			total += d
			worst = max(worst, d)
		}
	}
}
