package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/reconcile"
)

func newReconcileCommand() *cobra.Command {
	var o reconcileFlags
	cmd := &cobra.Command{
		Use:   "reconcile [dir]",
		Short: "GitOps mode: re-read the configuration, plan and apply on a loop, correcting drift",
		Long: "Every -interval, reads the configuration again (a directory your Git sync writes, with -git-url a Git repository " +
			"it clones and fetches itself, or with -flux-source the artifact of a Flux GitRepository or OCIRepository, checked against " +
			"its digest), plans against the cluster and applies any difference without asking, so out-of-band " +
			"edits are reverted. Each round takes the stack's lock, and is reported in the ConfigMap gpuslice-reconcile-<stack> of " +
			"the inventory namespace, in Events on it, and (with -metrics-address) in Prometheus metrics. Errors are printed and " +
			"retried on the next round. Stops on SIGINT or SIGTERM.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return o.run(ctx, cmd, args)
		},
	}
	o.f.register(cmd, true)
	o.lf.register(cmd)
	fl := cmd.Flags()
	fl.DurationVar(&o.interval, "interval", 30*time.Second, "time between rounds")
	fl.BoolVar(&o.once, "once", false, "run one round and exit (its error, if any, is the exit status)")
	fl.BoolVar(&o.force, "force-conflicts", false, "take over fields that another server-side applier manages")
	fl.StringVar(&o.gitURL, "git-url", "", "read the configuration from this Git repository (https:// or http://), cloned and fetched every round, instead of a directory; needs -stack")
	fl.StringVar(&o.gitRef, "git-ref", "main", "with -git-url: the branch, tag or commit to apply")
	fl.StringVar(&o.fluxSource, "flux-source", "", "read the configuration from the artifact of this Flux source, kind/namespace/name (gitrepository/flux-system/gpu-stacks, "+
		"or an ocirepository), downloaded from source-controller when its revision changes, instead of a directory; needs -stack")
	fl.StringVar(&o.gitPath, "git-path", ".", "with -git-url or -flux-source: the configuration's directory inside the repository or artifact")
	fl.StringVar(&o.gitDir, "git-dir", "", "with -git-url or -flux-source: where to keep the clone or the extracted artifact (default: a new directory under $TMPDIR, removed on exit)")
	fl.StringVar(&o.metricsAddress, "metrics-address", "", "address serving /metrics (gpuslice_reconcile_*) and /healthz, e.g. :9402; empty serves none")
	return cmd
}

// reconcileFlags are `gpuslice reconcile`'s flags.
type reconcileFlags struct {
	f                               stackFlags
	lf                              lockFlags
	interval                        time.Duration
	once, force                     bool
	gitURL, gitRef, gitPath, gitDir string
	fluxSource                      string
	metricsAddress                  string
}

func (o *reconcileFlags) run(ctx context.Context, cmd *cobra.Command, args []string) error {
	if err := o.check(args, cmd.Flags().Changed("git-ref")); err != nil {
		return err
	}
	e, err := o.f.engine()
	if err != nil {
		return err
	}
	src, cleanup, err := o.source(args, e)
	if err != nil {
		e.Close()
		return err
	}
	defer cleanup()
	// One engine for every round: its view of the cluster is listed once
	// and kept current by watches, so a round re-reads nothing; a change
	// made moments before a round shows in the next one.
	e.Continuous = true
	defer e.Close()
	reg := prometheus.NewRegistry()
	status := reconcile.NewStatus(e.Clients.Typed, e.Inventory.Namespace)
	defer status.Close()
	r := &reconcile.Reconciler{Engine: e, Source: src, Load: o.load(e), Stack: o.f.stack, NoLock: !o.lf.lock, LockTimeout: o.lf.timeout,
		ForceConflicts: o.force, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr(), Status: status, Metrics: reconcile.NewMetrics(reg)}
	if o.once {
		res := r.Round(ctx)
		if res.Locked != nil {
			return res.Locked
		}
		return res.Err
	}
	if o.metricsAddress != "" {
		stopServing, err := serveMetrics(o.metricsAddress, reg, cmd)
		if err != nil {
			return err
		}
		defer stopServing()
	}
	r.Run(ctx, o.interval)
	return nil
}

// load reads a revision's configuration with the flags' variables and
// tables, which the engine's checks then use.
func (o *reconcileFlags) load(e *engine.Engine) func(string) (*hclstack.Config, diag.Diagnostics) {
	return func(dir string) (*hclstack.Config, diag.Diagnostics) {
		c, diags := o.f.loadDiags(dir)
		e.Tables = o.f.tableSet
		return c, diags
	}
}

// check refuses flags that name two sources, a -git-ref that a Flux
// source would ignore, or a source without the stack's name.
func (o *reconcileFlags) check(args []string, gitRef bool) error {
	flag := "-git-url"
	switch {
	case o.gitURL != "" && o.fluxSource != "":
		return fmt.Errorf("reconcile: give -git-url or -flux-source, not both")
	case o.fluxSource != "" && gitRef:
		return fmt.Errorf("reconcile: -git-ref does not apply to -flux-source: the Flux object's spec.ref says what Flux fetches")
	case o.fluxSource != "":
		flag = "-flux-source"
		if _, _, _, err := reconcile.ParseFluxSource(o.fluxSource); err != nil {
			return fmt.Errorf("reconcile -flux-source: %w", err)
		}
	case o.gitURL == "":
		return nil
	}
	if len(args) > 0 {
		return fmt.Errorf("reconcile: give a directory or %s, not both (-git-path names the directory inside the repository)", flag)
	}
	if o.f.stack == "" {
		return fmt.Errorf("reconcile %s needs -stack: the stack's name is its inventory's and its status ConfigMap's", flag)
	}
	return nil
}

// source is the Source the flags name, with the function that removes
// what it keeps on disk when -git-dir does not name a directory.
func (o *reconcileFlags) source(args []string, e *engine.Engine) (reconcile.Source, func(), error) {
	if o.gitURL == "" && o.fluxSource == "" {
		return reconcile.Dir(dirArg(args)), func() {}, nil
	}
	dir, cleanup := o.gitDir, func() {}
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "gpuslice-reconcile-"); err != nil {
			return nil, nil, fmt.Errorf("make a directory for the Git clone or Flux artifact (set -git-dir or $TMPDIR to a writable one): %w", err)
		}
		cleanup = func() { os.RemoveAll(dir) }
	}
	if o.gitURL != "" {
		return &reconcile.Git{URL: o.gitURL, Ref: o.gitRef, Path: o.gitPath, WorkDir: dir}, cleanup, nil
	}
	kind, ns, name, _ := reconcile.ParseFluxSource(o.fluxSource)
	return &reconcile.Flux{Client: e.Clients.Dynamic, Kind: kind, Namespace: ns, Name: name, Path: o.gitPath, WorkDir: dir}, cleanup, nil
}

// serveMetrics serves reg on addr until the returned function is called.
func serveMetrics(addr string, reg *prometheus.Registry, cmd *cobra.Command) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(cmd.ErrOrStderr(), "Warning: serving metrics on %s stopped: %v\n", addr, err)
		}
	}()
	return func() { _ = srv.Close() }, nil
}
