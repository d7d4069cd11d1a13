package driver

import "path/filepath"

// LocalDirs points every directory of cfg under base, for a plugin that
// runs without a kubelet (the local control plane, tests): nothing is
// written under /var or /run of the host.
func LocalDirs(cfg Config, base string) Config {
	cfg.PluginDataDir = filepath.Join(base, "plugin")
	cfg.RegistrarDir = filepath.Join(base, "plugins_registry")
	cfg.CDIDir = filepath.Join(base, "cdi")
	cfg.StateDir = filepath.Join(base, "state")
	cfg.AccountingRoot = filepath.Join(base, "accounting")
	cfg.ShimDir = filepath.Join(base, "shim")
	return cfg
}

// SocketPath is where the plugin's DRA socket is (the kubelet dials it).
func (c Config) SocketPath() string { return filepath.Join(c.PluginDataDir, "dra.sock") }
