// Package gpuprocs tells which claim a GPU process belongs to. NVML lists
// every process using a GPU with its PID in the host's PID namespace (where
// the node plugin runs) and the memory the driver gave it; each process's
// cgroup names its pod, and a prepared claim knows the pods it is reserved
// for. The node plugin's metrics and its enforcer both attribute processes
// this way.
package gpuprocs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// podUIDPattern finds the pod UID in a cgroup path, as the cgroupfs driver
// writes it (pod1b4e…-…) and as the systemd driver does (pod1b4e…_…).
var podUIDPattern = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`)

// PodUIDOf returns the UID of the pod a process runs in, from its cgroup,
// or "" for a process outside any pod (or gone).
func PodUIDOf(procRoot string, pid uint32) string {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if err != nil {
		return ""
	}
	m := podUIDPattern.FindSubmatch(b)
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(string(m[1]), "_", "-")
}

// Owners charges the processes of pods to claims on one GPU: pods[i] are
// the pods of claim i if it is on the GPU (nil otherwise). A pod with two
// claims on one GPU is charged to the first: its processes' cgroups cannot
// tell the claims apart.
type Owners map[string]int

// NewOwners indexes the claims' pods.
func NewOwners(pods [][]string) Owners {
	o := Owners{}
	for i, ps := range pods {
		for _, p := range ps {
			if _, ok := o[p]; !ok {
				o[p] = i
			}
		}
	}
	return o
}

// Of is the claim a pod's processes are charged to, -1 for a pod of none
// (or no pod: "").
func (o Owners) Of(podUID string) int {
	if i, ok := o[podUID]; ok && podUID != "" {
		return i
	}
	return -1
}
