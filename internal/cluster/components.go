package cluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpuslice/gpuslice/internal/proc"
)

// controllerFlags is the controller-manager's --controllers, if set.
func (c *Cluster) controllerFlags() []string {
	if c.controllers == "" {
		return nil
	}
	return []string{"--controllers=" + c.controllers}
}

// featureGates is the --feature-gates flag of every component, if any.
func (c *Cluster) featureGates() []string {
	if c.gates == "" {
		return nil
	}
	return []string{"--feature-gates=" + c.gates}
}

// startEtcd starts etcd on etcdPort and waits until it is healthy.
func (c *Cluster) startEtcd(ctx context.Context, bin string, etcdPort, peerPort int, logDir string) error {
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	c.etcdURL = etcdURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	c.logf("starting etcd on %s", etcdURL)
	etcd, err := c.run(Etcd, bin, []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync", // test data: durability across power loss is not needed
		"--log-level=warn",
	}, logDir)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, etcd, etcdURL+"/health", false)
}

// startAPIServer starts kube-apiserver on apiPort, on etcd, and waits until
// it is ready.
func (c *Cluster) startAPIServer(ctx context.Context, bin string, apiPort int, keys *pki, tokenFile, logDir string) error {
	c.logf("starting kube-apiserver on %s", c.Host)
	apiserver, err := c.run(KubeAPIServer, bin, append([]string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		// The default reconciler refuses a loopback advertise address.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + keys.ServingCert,
		"--tls-private-key-file=" + keys.ServingKey,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + keys.SAPublicKey,
		"--service-account-signing-key-file=" + keys.SAPrivateKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// Real clusters allow privileged pods; gpuslice's admission policies
		// are what refuse them in tenant namespaces, so tests must see those.
		"--allow-privileged=true",
		// Real local nodes are named, not resolvable: reach kubelets (logs,
		// exec) at their InternalIP.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--profiling=false",
	}, c.featureGates()...), logDir)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, apiserver, c.Host+"/readyz", true)
}

// startControllers starts kube-scheduler and kube-controller-manager and
// waits until both are healthy and the controllers run.
func (c *Cluster) startControllers(ctx context.Context, bins map[string]string, schedPort, cmPort int, keys *pki, logDir string) error {
	kubeconfig := func(path string) []string {
		return []string{"--kubeconfig=" + path, "--authentication-kubeconfig=" + path, "--authorization-kubeconfig=" + path}
	}
	common := []string{
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--profiling=false",
	}
	common = append(common, c.featureGates()...)
	if c.qps > 0 {
		common = append(common, "--kube-api-qps="+strconv.Itoa(c.qps), "--kube-api-burst="+strconv.Itoa(2*c.qps))
	}
	c.logf("starting kube-scheduler and kube-controller-manager")
	scheduler, err := c.run(KubeScheduler, bins[KubeScheduler], append(append([]string{
		"--secure-port=" + strconv.Itoa(schedPort),
	}, kubeconfig(c.SchedulerKubeconfigPath)...), common...), logDir)
	if err != nil {
		return err
	}
	// The controller-manager keeps the admin identity: with
	// --use-service-account-credentials off it acts as itself for every
	// controller, and nothing gpuslice admits depends on who it is.
	controllers, err := c.run(KubeControllerManager, bins[KubeControllerManager], append(append([]string{
		"--secure-port=" + strconv.Itoa(cmPort),
		"--service-account-private-key-file=" + keys.SAPrivateKey,
	}, kubeconfig(c.KubeconfigPath)...), append(common, c.controllerFlags()...)...), logDir)
	if err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, scheduler, "https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz", false); err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, controllers, "https://127.0.0.1:"+strconv.Itoa(cmPort)+"/healthz", false); err != nil {
		return err
	}
	// Pods need the namespace's default service account; its appearance also
	// proves the controller-manager's controllers are running.
	if err := WaitForServiceAccount(ctx, c.client, "default"); err != nil {
		return fmt.Errorf("kube-controller-manager did not create the default service account: %w", err)
	}
	return nil
}

func (c *Cluster) run(name, binary string, args []string, logDir string) (*proc.Process, error) {
	p, err := proc.Run(name, binary, logDir, args)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// waitHealthy polls a health endpoint until it answers 200, the component
// exits, or ctx ends.
func (c *Cluster) waitHealthy(ctx context.Context, p *proc.Process, url string, withToken bool) error {
	client := insecureLoopbackClient()
	var lastErr error
	for {
		if err := p.ExitError(); err != nil {
			return fmt.Errorf("%w (a port already in use or a bad flag is the usual cause; see its log below)", err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if withToken {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			lastErr = fmt.Errorf("%s answered %s", url, resp.Status)
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy before the start-up timeout: %v", p.Name, lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
