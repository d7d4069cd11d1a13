// Package cluster runs a real, local Kubernetes control plane — etcd,
// kube-apiserver, kube-scheduler and kube-controller-manager built from
// pinned Go modules — on free loopback ports. Tests, `make demo` and
// `gpuslice dev up` use it; there is no kubelet, so nodes are registered as
// API objects and kept Ready by renewing their leases.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/internal/proc"
)

// Options configure Start. The zero value is a fresh cluster in a temporary
// directory that Stop removes.
type Options struct {
	// Dir holds certificates, etcd data, logs and the kubeconfig. Empty means
	// a new temporary directory, removed by Stop. A given Dir is emptied
	// first and kept after Stop (its logs stay readable).
	Dir string
	// BinDir holds the tool binaries; empty means FindBinDir().
	BinDir string
	// APIServerPort fixes the kube-apiserver port; 0 picks a free one.
	APIServerPort int
	// Timeout bounds the whole start-up; 0 means one minute.
	Timeout time.Duration
	// Logf, when set, receives one line per start-up step.
	Logf func(format string, args ...any)
	// FeatureGates, e.g. "DRAConsumableCapacity=false", are passed to the
	// API server, the scheduler and the controller-manager alike.
	FeatureGates string
	// ClientQPS raises the scheduler's and the controller-manager's client
	// rate limits (--kube-api-qps, burst twice it) from their defaults (50
	// and 20 requests/s), as Kubernetes' scheduler_perf does, so that a
	// benchmark measures scheduling rather than the client's throttle.
	ClientQPS int
	// Controllers is the controller-manager's --controllers, e.g.
	// "*,-node-lifecycle-controller" for a benchmark whose simulated nodes
	// must not be marked unreachable when a loaded machine renews their
	// leases late. Empty: every default controller.
	Controllers string
}

// Cluster is a running control plane. Use Stop to tear it down.
type Cluster struct {
	Dir            string
	KubeconfigPath string
	// Host is the kube-apiserver URL, e.g. https://127.0.0.1:41234.
	Host string
	// Token authenticates as a cluster admin (group system:masters).
	Token string
	// SchedulerKubeconfigPath is kube-scheduler's own kubeconfig: it
	// authenticates as SchedulerUser, without system:masters, as in a
	// kubeadm cluster, so that what the scheduler does on behalf of pods
	// (the ResourceClaims it makes for extended resources) arrives with the
	// identity a real cluster gives it and only the bootstrap RBAC's rights.
	SchedulerKubeconfigPath string
	// CAData is the PEM of the CA that signed the apiserver's certificate.
	CAData []byte
	// StartupTime is how long Start took until every component was ready.
	StartupTime time.Duration

	removeDir   bool
	etcdURL     string
	procs       []*proc.Process // in start order: etcd first
	client      kubernetes.Interface
	logf        func(string, ...any)
	gates       string
	qps         int
	controllers string

	mu        sync.Mutex
	nodes     []string
	stopOnce  sync.Once
	stopBeats context.CancelFunc
	beatsDone chan struct{}
}

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

// Start runs etcd, kube-apiserver, kube-scheduler and
// kube-controller-manager and returns once all of them report healthy and
// the controller-manager has created the `default` service account. On
// failure everything already started is stopped again and the error carries
// the tail of each component's log.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	began := time.Now()
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}

	binDir := opts.BinDir
	if binDir == "" {
		binDir = FindBinDir()
	}
	bins := map[string]string{}
	for _, name := range []string{Etcd, KubeAPIServer, KubeScheduler, KubeControllerManager} {
		path, err := ToolPath(binDir, name)
		if err != nil {
			return nil, err
		}
		bins[name] = path
	}
	if opts.APIServerPort != 0 {
		if err := checkPortFree(opts.APIServerPort); err != nil {
			return nil, err
		}
	}

	c := &Cluster{logf: logf, gates: opts.FeatureGates, qps: opts.ClientQPS, controllers: opts.Controllers}
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", "gpuslice-cluster-")
		if err != nil {
			return nil, fmt.Errorf("create cluster directory: %w", err)
		}
		c.Dir, c.removeDir = dir, true
	} else {
		if err := os.RemoveAll(opts.Dir); err != nil {
			return nil, fmt.Errorf("clear cluster directory %s: %w", opts.Dir, err)
		}
		if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("create cluster directory %s: %w", opts.Dir, err)
		}
		c.Dir = opts.Dir
	}

	if err := c.start(ctx, bins, opts.APIServerPort); err != nil {
		tails := c.LogTails(30)
		c.Stop()
		return nil, fmt.Errorf("%w\n%s", err, tails)
	}
	c.StartupTime = time.Since(began)
	logf("control plane ready in %s (kubeconfig %s)", c.StartupTime.Round(10*time.Millisecond), c.KubeconfigPath)
	return c, nil
}

func (c *Cluster) start(ctx context.Context, bins map[string]string, apiPort int) error {
	certDir := filepath.Join(c.Dir, "pki")
	logDir := filepath.Join(c.Dir, "logs")
	for _, d := range []string{certDir, logDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	keys, err := generatePKI(certDir)
	if err != nil {
		return err
	}
	c.CAData = keys.caPEM
	c.Token = randomToken()
	schedulerToken := randomToken()
	tokenFile := filepath.Join(certDir, "tokens.csv")
	tokens := c.Token + `,admin,admin-uid,"system:masters"` + "\n" +
		schedulerToken + "," + SchedulerUser + "," + SchedulerUser + "\n"
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
		return err
	}

	ports, err := freePorts(5)
	if err != nil {
		return err
	}
	etcdPort, peerPort, schedPort, cmPort := ports[0], ports[1], ports[2], ports[3]
	if apiPort == 0 {
		apiPort = ports[4]
	}
	c.Host = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.Host, c.CAData, "admin", c.Token); err != nil {
		return err
	}
	c.SchedulerKubeconfigPath = filepath.Join(c.Dir, "scheduler.kubeconfig")
	if err := writeKubeconfig(c.SchedulerKubeconfigPath, c.Host, c.CAData, SchedulerUser, schedulerToken); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	c.client = client

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	c.etcdURL = etcdURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	c.logf("starting etcd on %s", etcdURL)
	etcd, err := c.run(Etcd, bins[Etcd], []string{
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
	if err := c.waitHealthy(ctx, etcd, etcdURL+"/health", false); err != nil {
		return err
	}

	c.logf("starting kube-apiserver on %s", c.Host)
	apiserver, err := c.run(KubeAPIServer, bins[KubeAPIServer], append([]string{
		"--etcd-servers=" + etcdURL,
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
	if err := c.waitHealthy(ctx, apiserver, c.Host+"/readyz", true); err != nil {
		return err
	}

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

	beatCtx, cancel := context.WithCancel(context.Background())
	c.stopBeats = cancel
	c.beatsDone = make(chan struct{})
	go c.heartbeat(beatCtx)
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

// RESTConfig returns an admin client configuration for the cluster.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            c.Host,
		BearerToken:     c.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData},
		QPS:             200,
		Burst:           400,
	}
}

// Client returns an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// PIDs returns the process ids of the components, for checks that nothing is
// left running.
func (c *Cluster) PIDs() []int {
	pids := make([]int, 0, len(c.procs))
	for _, p := range c.procs {
		pids = append(pids, p.PID())
	}
	return pids
}

// LogTails returns the last lines of every component's log, headed by its
// name, for error messages and failed tests.
func (c *Cluster) LogTails(lines int) string {
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "--- last %d lines of %s (%s) ---\n%s\n", lines, p.Name, p.LogPath, p.LogTail(lines))
	}
	return b.String()
}

// Stop stops the components in reverse start order — kube-apiserver before
// etcd, or the apiserver hangs on its storage — and removes a temporary
// directory. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		if c.stopBeats != nil {
			c.stopBeats()
			<-c.beatsDone
		}
		for i := len(c.procs) - 1; i >= 0; i-- {
			c.procs[i].Stop(15 * time.Second)
		}
		if c.removeDir {
			_ = os.RemoveAll(c.Dir)
		}
	})
}

// Failed reports the first component that is no longer running, if any.
func (c *Cluster) Failed() error {
	var errs []error
	for _, p := range c.procs {
		if err := p.ExitError(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
