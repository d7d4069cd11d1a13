package realnode

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// A node's clean-up must happen even when its owner is killed (a test run
// past its timeout): every node has a reaper, a small process in a session
// of its own that waits for its owner to go away (the pipe from the owner
// reaches end of file) and then kills what the node still runs, removes its
// cgroups and bridge and gives its slot back. After a clean Stop the
// owner has done all that, and the reaper finds nothing to do.
const reaperEnv = "GPUSLICE_REALNODE_REAPER"

func init() {
	slot := os.Getenv(reaperEnv)
	if slot == "" {
		return
	}
	n, err := strconv.Atoi(slot)
	if err != nil {
		fail(fmt.Errorf("%s=%q: %w", reaperEnv, slot, err))
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until the owner is gone
	if err := reap(n); err != nil {
		fail(err)
	}
	os.Exit(0)
}

// reaper is the owner's end of a reaper.
type reaper struct {
	cmd  *exec.Cmd
	pipe *os.File
}

func startReaper(slot int) (*reaper, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(self)
	cmd.Args = []string{"gpuslice-realnode-reaper"}
	cmd.Env = append(os.Environ(), reaperEnv+"="+strconv.Itoa(slot))
	cmd.Stdin = r
	// Its own session: the terminal's Ctrl-C and a test's process-group
	// kill must not take it down with its owner.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the node's reaper: %w", err)
	}
	return &reaper{cmd: cmd, pipe: w}, nil
}

// dismiss tells the reaper the owner has cleaned up, and waits for it.
func (r *reaper) dismiss() error {
	r.pipe.Close()
	return r.cmd.Wait()
}

// reap cleans up the slot if its owner did not.
func reap(slot int) error {
	unlock, err := lockExistingRegistry()
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the last node released everything
	}
	if err != nil {
		return err
	}
	rs, err := records()
	unlock()
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Slot != slot {
			continue
		}
		if r.Owner.alive() {
			return nil // not ours to clean: the slot was taken again
		}
		if err := cleanUp(r); err != nil {
			return err
		}
		return releaseSlot(slot)
	}
	return nil // the owner released it
}

// cleanUp kills every process of the node, removes its cgroups and its
// bridge. Its mounts live in its own mount namespace and vanish with its
// last process.
func cleanUp(r record) error {
	var errs []error
	if r.CgroupRel != "" {
		ms, err := cgroupMounts()
		if err != nil {
			errs = append(errs, err)
		} else if err := killCgroup(ms, r.CgroupRel, 30*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if r.Slot > 0 {
		if err := deleteLink(bridgeName(r.Slot)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
