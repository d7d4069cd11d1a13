package realnode

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"text/template"

	"github.com/gpuslice/gpuslice/internal/proc"
)

// containerdConfig is the node's containerd configuration (format version
// 3, containerd 2.x). Every path is the node's own; the settings this
// machine needs are commented.
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 3
root = {{printf "%q" .Root}}
state = {{printf "%q" .State}}
temp = {{printf "%q" .Temp}}
# Snapshotters and services a local node neither has nor needs.
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.nri.v1.nri",
]

[grpc]
  address = {{printf "%q" .Socket}}
[ttrpc]
  address = {{printf "%q" (print .Socket ".ttrpc")}}
[debug]
  address = ""
[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = {{printf "%q" .Opt}}

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = {{printf "%q" .PauseImage}}
    [plugins.'io.containerd.cri.v1.images'.registry]
      # hosts.toml per registry: images come from the cluster's local registry.
      config_path = {{printf "%q" .RegistryHosts}}

  [plugins.'io.containerd.cri.v1.runtime']
    # Root without CAP_SYS_RESOURCE (this kind of VM) cannot lower
    # oom_score_adj below its own: runc would fail every container.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    # The node plugin writes one spec per prepared claim here.
    cdi_spec_dirs = [{{printf "%q" .CDIDir}}]
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = {{printf "%q" .Runc}}
          Root = {{printf "%q" .RuncRoot}}
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [{{printf "%q" .CNIBin}}]
      conf_dir = {{printf "%q" .CNIConf}}

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
`))

type containerdValues struct {
	Root, State, Temp, Socket, Opt, PauseImage, RegistryHosts, CDIDir, Runc, RuncRoot, CNIBin, CNIConf string
}

// hostsConfig sends pulls of a registry name to the local registry over
// plain HTTP (it listens on loopback only).
var hostsConfig = template.Must(template.New("hosts").Parse(`server = {{printf "%q" .URL}}

[host.{{printf "%q" .URL}}]
  capabilities = ["pull", "resolve"]
`))

func writeContainerdConfig(path string, v containerdValues, mirrors map[string]string) error {
	var b bytes.Buffer
	if err := containerdConfig.Execute(&b, v); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return err
	}
	for name, url := range mirrors {
		dir := filepath.Join(v.RegistryHosts, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		var h bytes.Buffer
		if err := hostsConfig.Execute(&h, struct{ URL string }{url}); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), h.Bytes(), 0o644); err != nil {
			return fmt.Errorf("registry hosts of %s: %w", name, err)
		}
	}
	return nil
}

func (n *Node) startContainerd(ctx context.Context) error {
	l := n.l
	if err := writeContainerdConfig(l.containerdConfig(), containerdValues{
		Root: l.containerdRoot(), State: l.containerdState(), Temp: l.path("run", "tmp"), Socket: l.containerdSocket(),
		Opt: l.path("containerd", "opt"), PauseImage: n.opts.PauseImage, RegistryHosts: l.registryHosts(),
		CDIDir: CDIDir, Runc: filepath.Join(n.opts.BinDir, "runc"), RuncRoot: l.path("run", "runc"),
		CNIBin: filepath.Join(n.opts.BinDir, "cni"), CNIConf: l.cniConf(),
	}, n.opts.Mirrors); err != nil {
		return fmt.Errorf("write containerd configuration: %w", err)
	}
	launch := launch{
		CgroupProcs: n.daemon, NewMountNS: true, Binds: l.shadows(),
		Argv: []string{filepath.Join(n.opts.BinDir, "containerd"), "--config", l.containerdConfig()},
	}
	cmd, err := launch.command()
	if err != nil {
		return err
	}
	// containerd finds containerd-shim-runc-v2 on PATH.
	cmd.Env = append(cmd.Env, "PATH="+n.opts.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	p, err := proc.Start("containerd", cmd, l.logs())
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.containerd = p
	n.mu.Unlock()
	return waitFor(ctx, p, "containerd to listen on "+l.containerdSocket(), func(context.Context) (bool, error) {
		c, err := net.Dial("unix", l.containerdSocket())
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
}
