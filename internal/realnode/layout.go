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

// shadows are host paths kubelet and containerd use whatever they are told,
// each replaced inside the node's mount namespace by a directory of the
// node's: [node directory, host path].
func (l layout) shadows() [][2]string {
	return [][2]string{
		{l.path("shadow", "device-plugins"), "/var/lib/kubelet/device-plugins"}, // kubelet's device-plugin socket
		{l.path("shadow", "containers"), "/var/log/containers"},                 // kubelet's container log links
		{l.path("run", "containerd-shims"), "/run/containerd"},                  // containerd's shim sockets
	}
}
