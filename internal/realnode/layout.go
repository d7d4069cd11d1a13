package realnode

import "path/filepath"

// layout is where a node keeps everything, under one directory. run/ plays
// the host's /run: a reboot empties it.
type layout string

func (l layout) path(p ...string) string { return filepath.Join(append([]string{string(l)}, p...)...) }

func (l layout) logs() string { return l.path("logs") }

func (l layout) containerdConfig() string { return l.path("containerd", "config.toml") }
func (l layout) containerdRoot() string   { return l.path("containerd", "root") }
func (l layout) containerdSocket() string { return l.path("run", "containerd.sock") }
func (l layout) containerdState() string  { return l.path("run", "containerd") }
func (l layout) registryHosts() string    { return l.path("containerd", "certs.d") }

func (l layout) kubeletRoot() string   { return l.path("kubelet") }
func (l layout) kubeletConfig() string { return l.path("kubelet-config.yaml") }
func (l layout) kubeletCerts() string  { return l.path("pki") }
func (l layout) podLogs() string       { return l.path("pod-logs") }
func (l layout) volumePlugins() string { return l.path("volume-plugins") }

func (l layout) cniConf() string { return l.path("cni", "net.d") }
func (l layout) cniIPAM() string { return l.path("run", "cni-ipam") }

// The node plugin's directories, as a DaemonSet would mount them.
func (l layout) pluginDir() string     { return l.path("kubelet", "plugins", "gpuslice.dev") }
func (l layout) registrarDir() string  { return l.path("kubelet", "plugins_registry") }
func (l layout) cdiDir() string        { return l.path("run", "cdi") }
func (l layout) accountingDir() string { return l.path("run", "gpuslice", "claims") }
func (l layout) pluginState() string   { return l.path("gpuslice") }
func (l layout) shimDir() string       { return l.path("gpuslice", "shim") }
func (l layout) driverRoot() string    { return l.path("driver-root") }
func (l layout) bootID() string        { return l.path("boot_id") }

func (l layout) toolkitDir() string { return l.path("nvidia-container-runtime") }

// Inside a node's mount namespace, its kubelet, containerd and the pods they
// run see the node's own directories at the paths a GPU node has: what a
// DaemonSet mounts from the host (the node plugin's) is then this node's.
const (
	KubeletDir    = "/var/lib/kubelet"
	CDIDir        = "/var/run/cdi"
	StateDir      = "/var/lib/gpuslice"
	AccountingDir = "/run/gpuslice/claims"
	// DriverRoot is where the simulated driver is, as NVIDIA's driver
	// container puts a real one.
	DriverRoot = "/run/nvidia/driver"
	// ToolkitConfig is the NVIDIA Container Toolkit configuration a node
	// has, set as gpuslice requires.
	ToolkitConfig = "/etc/nvidia-container-runtime/config.toml"
)

// shadows are the node's directories bound over host paths in its mount
// namespace: [node directory, path]. Besides the standard paths above,
// those kubelet and containerd use whatever they are told: kubelet's device
// plugin socket (under its root), its container log links, containerd's
// shim sockets.
func (l layout) shadows() [][2]string {
	return [][2]string{
		{l.kubeletRoot(), KubeletDir},
		{l.cdiDir(), CDIDir},
		{l.pluginState(), StateDir},
		{l.path("run", "gpuslice"), "/run/gpuslice"},
		{l.driverRoot(), DriverRoot},
		{l.toolkitDir(), "/etc/nvidia-container-runtime"},
		{l.path("shadow", "containers"), "/var/log/containers"},
		{l.path("run", "containerd-shims"), "/run/containerd"},
	}
}
