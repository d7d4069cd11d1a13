package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMount is one mounted cgroup hierarchy: a v1 controller hierarchy
// (cpu, memory, name=systemd, …) or the v2 unified one.
type cgroupMount struct {
	Path string
	V2   bool
	// Cpuset: a v1 cpuset hierarchy, where a new cgroup is unusable until
	// cpuset.cpus and cpuset.mems are copied from its parent.
	Cpuset bool
}

// cgroupMounts lists the host's cgroup hierarchies from /proc/self/mountinfo.
func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options … - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 > len(fields) || len(fields) < 5 {
			continue
		}
		switch fields[sep+1] {
		case "cgroup":
			opts := fields[sep+3]
			out = append(out, cgroupMount{Path: fields[4], Cpuset: hasOption(opts, "cpuset")})
		case "cgroup2":
			out = append(out, cgroupMount{Path: fields[4], V2: true})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	return out, nil
}

func hasOption(opts, name string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == name {
			return true
		}
	}
	return false
}

// v1Mounts reports whether the host runs cgroup v1 controllers (kubelet then
// needs failCgroupV1: false).
func v1Mounts(ms []cgroupMount) bool {
	for _, m := range ms {
		if !m.V2 {
			return true
		}
	}
	return false
}

// createCgroup makes rel (e.g. gpuslice/node-a-s3/daemons) in every
// hierarchy, ready to hold processes, and returns the cgroup.procs files.
func createCgroup(ms []cgroupMount, rel string) ([]string, error) {
	var procs []string
	for _, m := range ms {
		dir := m.Path
		for _, part := range strings.Split(rel, "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("create cgroup %s: %w (real nodes need writable cgroups: run as root)", dir, err)
			}
			if m.Cpuset {
				for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
					if err := inheritValue(parent, dir, file); err != nil {
						return nil, err
					}
				}
			}
			if m.V2 {
				// Controllers a child may use must be enabled in its parent.
				enableControllers(parent)
			}
		}
		procs = append(procs, filepath.Join(dir, "cgroup.procs"))
	}
	return procs, nil
}

func inheritValue(parent, dir, file string) error {
	cur, err := os.ReadFile(filepath.Join(dir, file))
	if err == nil && strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	v, err := os.ReadFile(filepath.Join(parent, file))
	if err != nil {
		return fmt.Errorf("read %s of %s: %w", file, parent, err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), v, 0); err != nil {
		return fmt.Errorf("set %s of %s: %w", file, dir, err)
	}
	return nil
}

func enableControllers(dir string) {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return
	}
	for _, c := range strings.Fields(string(avail)) {
		// Best effort: a controller the host keeps for itself stays off.
		_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0)
	}
}

// killCgroup kills every process in rel and below, in every hierarchy,
// until none is left, then removes the cgroups deepest first.
func killCgroup(ms []cgroupMount, rel string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := map[int]bool{}
		for _, m := range ms {
			for _, dir := range cgroupDirs(filepath.Join(m.Path, rel)) {
				for _, pid := range readPIDs(filepath.Join(dir, "cgroup.procs")) {
					pids[pid] = true
				}
			}
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in cgroup %s did not die within %s", keys(pids), rel, timeout)
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond) // a killed process leaves its cgroup as it exits
	}
	var errs []error
	for _, m := range ms {
		dirs := cgroupDirs(filepath.Join(m.Path, rel))
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := removeCgroupDir(dirs[i], deadline); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeCgroupDir retries: a cgroup stays busy for a moment after its last
// process exited.
func removeCgroupDir(dir string, deadline time.Time) error {
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cgroupDirs lists root and every cgroup below it, parents first.
func cgroupDirs(root string) []string {
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	sort.SliceStable(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") < strings.Count(dirs[j], "/") })
	return dirs
}

func readPIDs(path string) []int {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func keys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
