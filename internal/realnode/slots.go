package realnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Nodes on one machine may be started by different processes at once (go
// test runs packages in parallel), so what must not collide — bridge name,
// subnet, cgroup — comes from a slot taken in a registry shared by every
// process on the machine. A slot's record also says what to clean up when
// its owner died without doing so.
var registryDir = "/run/gpuslice-realnode"

// maxSlots bounds the slots: one /24 each in subnetBase.
const maxSlots = 250

// record is a slot's file in the registry.
type record struct {
	Slot  int    `json:"slot"`
	Node  string `json:"node"`
	Owner owner  `json:"owner"`
	// Dir is the node's directory; CgroupRel its cgroup below every
	// hierarchy's root.
	Dir       string `json:"dir"`
	CgroupRel string `json:"cgroupRel"`
}

// owner identifies a process across PID reuse by its start time.
type owner struct {
	PID   int    `json:"pid"`
	Start string `json:"start"`
}

func self() owner { return owner{PID: os.Getpid(), Start: processStart(os.Getpid())} }

// alive reports whether the owner still runs. A zombie does not: an owner
// that exited stays one until its parent (go test, a shell) collects it.
func (o owner) alive() bool {
	state, start := processState(o.PID)
	return start != "" && start == o.Start && state != "Z" && state != "X"
}

func processStart(pid int) string {
	_, start := processState(pid)
	return start
}

// processState reads field 3 (state) and field 22 (start time in clock
// ticks) of /proc/<pid>/stat.
func processState(pid int) (state, start string) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", ""
	}
	s := string(data)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(rest) < 20 {
		return "", ""
	}
	return rest[0], rest[19]
}

func recordPath(slot int) string {
	return filepath.Join(registryDir, "slot-"+strconv.Itoa(slot)+".json")
}

// lockRegistry takes the machine-wide registry lock. A concurrent release
// may remove the directory between open and lock, hence the check that the
// locked directory is still the one at registryDir.
func lockRegistry() (unlock func(), err error) {
	for {
		if err := os.MkdirAll(registryDir, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w (real nodes need root)", registryDir, err)
		}
		unlock, err := lockExistingRegistry()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed between MkdirAll and open
		}
		return unlock, err
	}
}

// lockExistingRegistry is lockRegistry without creating the registry: it
// fails with fs.ErrNotExist when there is none.
func lockExistingRegistry() (unlock func(), err error) {
	for {
		f, err := os.Open(registryDir)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", registryDir, err)
		}
		var locked, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &locked) == nil && syscall.Stat(registryDir, &now) == nil && locked.Ino == now.Ino {
			return func() { f.Close() }, nil
		}
		f.Close()
	}
}

// records reads every slot record; call with the registry locked.
func records() ([]record, error) {
	paths, err := filepath.Glob(filepath.Join(registryDir, "slot-*.json"))
	if err != nil {
		return nil, err
	}
	var out []record
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r record
		if err := json.Unmarshal(data, &r); err != nil {
			// Torn by a crash mid-write: the slot number is in the name.
			r.Slot, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "slot-"), ".json"))
		}
		out = append(out, r)
	}
	return out, nil
}

// takeSlot cleans up after dead owners, records a free slot for node, and
// creates the host paths nodes shadow.
func takeSlot(node, dir string, hostPaths []string) (record, error) {
	unlock, err := lockRegistry()
	if err != nil {
		return record{}, err
	}
	defer unlock()
	rs, err := records()
	if err != nil {
		return record{}, err
	}
	used := map[int]bool{}
	for _, r := range rs {
		if !r.Owner.alive() {
			// Its reaper should have done this; a machine reset between
			// the two would not let it.
			if err := cleanUp(r); err == nil {
				_ = os.Remove(recordPath(r.Slot))
				continue
			}
		}
		used[r.Slot] = true
	}
	for slot := 1; slot <= maxSlots; slot++ {
		if used[slot] {
			continue
		}
		r := record{Slot: slot, Node: node, Owner: self(), Dir: dir, CgroupRel: fmt.Sprintf("gpuslice/%s-%d", node, slot)}
		data, _ := json.Marshal(r)
		if err := os.WriteFile(recordPath(slot), data, 0o600); err != nil {
			return record{}, err
		}
		if err := ensureHostPaths(hostPaths); err != nil {
			_ = os.Remove(recordPath(slot))
			return record{}, fmt.Errorf("create the host paths real nodes shadow: %w", err)
		}
		return r, nil
	}
	return record{}, fmt.Errorf("all %d real-node slots on this machine are in use (see %s)", maxSlots, registryDir)
}

// releaseSlot forgets a cleaned-up slot; the last one out removes the
// registry and the host paths nodes shadow.
func releaseSlot(slot int) error {
	unlock, err := lockRegistry()
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(recordPath(slot)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	rs, err := records()
	if err != nil || len(rs) > 0 {
		return err
	}
	removeShadowedPaths()
	if ms, err := cgroupMounts(); err == nil {
		for _, m := range ms {
			_ = syscall.Rmdir(filepath.Join(m.Path, "gpuslice"))
		}
	}
	return os.Remove(registryDir)
}
