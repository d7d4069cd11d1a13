package enforce

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrGone is returned for a process that exited, or whose PID now belongs
// to a process that is not the one to stop.
var ErrGone = errors.New("the process is gone")

// Signal sends SIGKILL to pid through a pidfd, once mine (asked after the
// pidfd is open) says the PID still is the process to stop: a PID reused
// between the sample and the kill is not signalled.
func Signal(pid uint32, mine func() bool) error {
	fd, err := unix.PidfdOpen(int(pid), 0)
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if !mine() {
		return ErrGone
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return ErrGone
		}
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	return nil
}

// describe reads a process's name and its PID in its own PID namespace
// (the last of its NSpid line); empty and 0 if it is gone.
func describe(procRoot string, pid uint32) (string, uint32) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "status"))
	if err != nil {
		return "", 0
	}
	var name string
	var nspid uint32
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "Name":
			name = strings.TrimSpace(v)
		case "NSpid":
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseUint(f[len(f)-1], 10, 32)
				nspid = uint32(n)
			}
		}
	}
	return name, nspid
}
