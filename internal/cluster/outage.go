package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuslice/gpuslice/internal/proc"
)

// Outages, for tests that prove a client survives them: the API server or
// etcd stopped (or killed, as a crash or the OOM killer would) and started
// again with the same flags, port and data. The other components keep
// running and retry, as they would in a real cluster.

// StopAPIServer stops kube-apiserver alone, as an outage would; the other
// components keep running and retry. StartAPIServer brings it back. It
// stops listening at once but may take its whole grace period to exit.
func (c *Cluster) StopAPIServer() {
	if p := c.process(KubeAPIServer); p != nil {
		p.Stop(15 * time.Second)
	}
}

// KillAPIServer ends kube-apiserver with SIGKILL, as a crash would:
// requests in flight are cut off with their outcome unknown to the client.
// StartAPIServer brings it back.
func (c *Cluster) KillAPIServer() {
	if p := c.process(KubeAPIServer); p != nil {
		p.Kill()
	}
}

// StartAPIServer restarts a stopped kube-apiserver with the same flags and
// port and waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	p, err := c.restart(KubeAPIServer)
	if err != nil || p == nil {
		return err
	}
	return c.waitHealthy(ctx, p, c.Host+"/readyz", true)
}

// StopEtcd stops etcd (SIGTERM, then SIGKILL after grace); kube-apiserver
// keeps running and fails or holds the requests that need storage.
// StartEtcd brings it back with its data.
func (c *Cluster) StopEtcd(grace time.Duration) {
	if p := c.process(Etcd); p != nil {
		p.Stop(grace)
	}
}

// StartEtcd restarts a stopped etcd with the same flags and data directory
// and waits until it is healthy and kube-apiserver ready again.
func (c *Cluster) StartEtcd(ctx context.Context) error {
	p, err := c.restart(Etcd)
	if err != nil || p == nil {
		return err
	}
	if err := c.waitHealthy(ctx, p, c.etcdURL+"/health", false); err != nil {
		return err
	}
	api := c.process(KubeAPIServer)
	if api == nil || !api.Running() {
		return nil
	}
	return c.waitHealthy(ctx, api, c.Host+"/readyz", true)
}

// restart starts the named component again once it has exited; nil when
// it is still running.
func (c *Cluster) restart(name string) (*proc.Process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.procs {
		if p.Name != name {
			continue
		}
		if p.Running() {
			return nil, nil
		}
		np, err := p.Restart()
		if err != nil {
			return nil, err
		}
		c.procs[i] = np
		return np, nil
	}
	return nil, fmt.Errorf("no %s in this cluster", name)
}

func (c *Cluster) process(name string) *proc.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}
