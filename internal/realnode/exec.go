package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A node's daemons must start inside the node's cgroup (so that clean-up can
// find every process they ever start, container shims included) and inside
// the node's private mount namespace (so that kubelet's and containerd's
// mounts never reach the host and vanish with the node, and the few host
// paths kubelet and containerd hard-code are the node's own). Go cannot run
// code between fork and exec, so the starting binary re-executes itself with
// execEnv set; init below enters the cgroup and namespace and then execs the
// daemon. Any binary linking this package (gpuslice-dev, test binaries) can
// therefore start nodes.
const execEnv = "GPUSLICE_REALNODE_EXEC"

// launch is what the re-executed binary does before exec.
type launch struct {
	// CgroupProcs are cgroup.procs files to join, one per hierarchy.
	CgroupProcs []string `json:"cgroupProcs"`
	// NewMountNS creates a private mount namespace; JoinMountNS enters the
	// one of that process instead.
	NewMountNS  bool `json:"newMountNS,omitempty"`
	JoinMountNS int  `json:"joinMountNS,omitempty"`
	// Binds are bind mounts made in a new namespace: [source, target].
	Binds [][2]string `json:"binds,omitempty"`
	Argv  []string    `json:"argv"`
}

func init() {
	spec := os.Getenv(execEnv)
	if spec == "" {
		return
	}
	var l launch
	if err := json.Unmarshal([]byte(spec), &l); err != nil {
		fail(fmt.Errorf("decode %s: %w", execEnv, err))
	}
	fail(l.exec())
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "gpuslice realnode: %v\n", err)
	os.Exit(127)
}

func (l launch) exec() error {
	self := []byte(strconv.Itoa(os.Getpid()))
	for _, procs := range l.CgroupProcs {
		if err := os.WriteFile(procs, self, 0); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	// Namespaces belong to the thread; exec keeps the calling thread's.
	runtime.LockOSThread()
	switch {
	case l.NewMountNS:
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("new mount namespace: %w", err)
		}
		// Private: nothing mounted here propagates to the host.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make mounts private: %w", err)
		}
		for _, b := range l.Binds {
			if err := unix.Mount(b[0], b[1], "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind %s over %s: %w", b[0], b[1], err)
			}
		}
	case l.JoinMountNS != 0:
		// setns into a mount namespace needs a filesystem context of our own.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare filesystem context: %w", err)
		}
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", l.JoinMountNS), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open mount namespace of %d: %w", l.JoinMountNS, err)
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("enter mount namespace of %d: %w", l.JoinMountNS, err)
		}
		unix.Close(fd)
	}
	path, err := exec.LookPath(l.Argv[0])
	if err != nil {
		return err
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if len(kv) > len(execEnv) && kv[:len(execEnv)+1] == execEnv+"=" {
			continue
		}
		env = append(env, kv)
	}
	return syscall.Exec(path, l.Argv, env)
}

// command returns a command that runs argv as l describes, through the
// current executable.
func (l launch) command() (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Args = []string{l.Argv[0]}
	cmd.Env = append(os.Environ(), execEnv+"="+string(spec))
	return cmd, nil
}
