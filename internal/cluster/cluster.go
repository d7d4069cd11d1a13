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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/internal/freeport"
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

// start writes the cluster's credentials and starts etcd, the API server,
// the scheduler and the controller-manager in dir, each once the one it
// needs is healthy.
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

	// Each component's ports are drawn just before it starts, so that a
	// port stays unbound for as short a time as can be.
	ports, err := freeport.Ports(2)
	if err != nil {
		return err
	}
	if err := c.startEtcd(ctx, bins[Etcd], ports[0], ports[1], logDir); err != nil {
		return err
	}
	if apiPort == 0 {
		if ports, err = freeport.Ports(1); err != nil {
			return err
		}
		apiPort = ports[0]
	}
	if err := c.connect(apiPort, schedulerToken); err != nil {
		return err
	}
	if err := c.startAPIServer(ctx, bins[KubeAPIServer], apiPort, keys, tokenFile, logDir); err != nil {
		return err
	}
	if ports, err = freeport.Ports(2); err != nil {
		return err
	}
	if err := c.startControllers(ctx, bins, ports[0], ports[1], keys, logDir); err != nil {
		return err
	}

	beatCtx, cancel := context.WithCancel(context.Background())
	c.stopBeats = cancel
	c.beatsDone = make(chan struct{})
	go c.heartbeat(beatCtx)
	return nil
}

// connect writes the admin's and the scheduler's kubeconfigs for the API
// server at apiPort, and makes the cluster's own client.
func (c *Cluster) connect(apiPort int, schedulerToken string) error {
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
	return nil
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
