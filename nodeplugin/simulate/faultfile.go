package simulate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// FaultFile is the simulated driver's fault log in a node plugin's state
// dir: what a test on real nodes appends there, the simulated GPUs report,
// as a real driver reports what it writes to the kernel log. It is a host
// file that no container mounts (the GPUs' state files are shared with
// the tenants' containers, so a tenant could write there), one fault a
// line:
//
//	xid GPU XID   a critical XID error on GPU (its index), e.g. "xid 0 79"
//	ecc GPU       a double-bit ECC error
//	lost GPU      the GPU falls off the bus
//	found GPU     the GPU answers again
func FaultFile(stateDir string) string { return filepath.Join(stateDir, "simulated-faults") }

// faultPoll is how often the fault log is read for new lines.
const faultPoll = 200 * time.Millisecond

// WatchFaults follows the fault log at path (created if missing) from its
// current end until ctx ends, injecting each new line's fault into s; a
// line it cannot read is logged through logf and skipped.
func WatchFaults(ctx context.Context, s *server.Server, path string, logf func(format string, args ...any)) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("simulated driver's fault log: %w", err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return fmt.Errorf("simulated driver's fault log %s: %w", path, err)
	}
	go func() {
		defer f.Close()
		r := bufio.NewReader(f)
		var partial string
		t := time.NewTicker(faultPoll)
		defer t.Stop()
		for {
			line, err := r.ReadString('\n')
			partial += line
			if err == nil {
				if err := injectLine(s, strings.TrimSpace(partial)); err != nil {
					logf("simulated driver's fault log %s: %v", path, err)
				}
				partial = ""
				continue
			}
			if !errors.Is(err, io.EOF) {
				logf("simulated driver's fault log %s: %v", path, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

func injectLine(s *server.Server, line string) error {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil
	}
	args := make([]uint64, len(fields)-1)
	for i, a := range fields[1:] {
		v, err := strconv.ParseUint(a, 10, 32)
		if err != nil {
			return fmt.Errorf("line %q: %q is not a number", line, a)
		}
		args[i] = v
	}
	want := map[string]int{"xid": 2, "ecc": 1, "lost": 1, "found": 1}
	n, ok := want[fields[0]]
	if !ok || len(args) != n {
		return fmt.Errorf("line %q: want \"xid GPU XID\", \"ecc GPU\", \"lost GPU\" or \"found GPU\"", line)
	}
	gpu := int(args[0])
	var err error
	switch fields[0] {
	case "xid":
		_, err = InjectXID(s, gpu, args[1])
	case "ecc":
		_, err = InjectDoubleBitECC(s, gpu)
	case "lost", "found":
		err = SetLost(s, gpu, fields[0] == "lost")
	}
	if err != nil {
		return fmt.Errorf("line %q: %w", line, err)
	}
	return nil
}
