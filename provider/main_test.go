package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/provider"
)

// The acceptance tests run OpenTofu (bin/tofu) against the provider served
// in-process, on the local control plane started once for the package — or
// on the tester's own cluster when KUBE_CONFIG_PATH is set.
//
// They run one after another: every quota grants 0 slices of every package
// in the cluster, so a package another test creates or deletes meanwhile is
// (rightly) a change the quota's next plan shows.

var (
	kubeconfig string
	kube       kubernetes.Interface
	// own is true on the tester's cluster: tests get slices from its node
	// plugin (needSlices) and give way for platform tests
	// (withoutSuitePlatform).
	own bool
	// testCluster is the local control plane (nil on the tester's cluster).
	testCluster *cluster.Cluster
)

func TestMain(m *testing.M) {
	if path := os.Getenv("KUBE_CONFIG_PATH"); path != "" {
		os.Exit(runOn(m, path))
	}
	os.Exit(clustertest.Main(m, cluster.Options{}, func(c *cluster.Cluster) error {
		ctx := context.Background()
		kubeconfig, kube, testCluster = c.KubeconfigPath, c.Client(), c
		for _, n := range []string{"gpu-node-1", "gpu-node-2"} {
			if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: n}); err != nil {
				return err
			}
			if err := v100(n).publish(ctx); err != nil {
				return err
			}
		}
		return setAccEnv()
	}))
}

func runOn(m *testing.M, path string) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "KUBE_CONFIG_PATH=%s: %v\n", path, err)
		return 1
	}
	kube, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeconfig, own, restConfig = path, true, cfg
	if err := setAccEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := checkForeignPlatform(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "KUBE_CONFIG_PATH=%s: %v\n", path, err)
		return 1
	}
	code := m.Run()
	if err := cleanUpTesterCluster(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

// setAccEnv points terraform-plugin-testing at bin/tofu and the provider's
// address, unless the tester chose otherwise.
func setAccEnv() error {
	_, file, _, _ := runtime.Caller(0)
	tofu := filepath.Join(filepath.Dir(file), "..", "bin", "tofu")
	defaults := map[string]string{
		"TF_ACC": "1", "TF_ACC_TERRAFORM_PATH": tofu,
		"TF_ACC_PROVIDER_NAMESPACE": "gpuslice", "TF_ACC_PROVIDER_HOST": "registry.terraform.io",
	}
	for k, v := range defaults {
		if os.Getenv(k) == "" {
			if err := os.Setenv(k, v); err != nil {
				return err
			}
		}
	}
	// A CLI configuration that names no file is read as empty; one that
	// names a missing file makes tofu print a warning before its version.
	if f := os.Getenv("TF_CLI_CONFIG_FILE"); f != "" {
		if _, err := os.Stat(f); err != nil {
			empty := filepath.Join(os.TempDir(), "gpuslice-acc-empty.tfrc")
			if err := os.WriteFile(empty, nil, 0o644); err != nil {
				return err
			}
			os.Setenv("TF_CLI_CONFIG_FILE", empty)
		}
	}
	if _, err := os.Stat(os.Getenv("TF_ACC_TERRAFORM_PATH")); err != nil {
		return fmt.Errorf("OpenTofu not found at %s (run make tools): %w", os.Getenv("TF_ACC_TERRAFORM_PATH"), err)
	}
	return nil
}

// needCluster skips a test when TestMain started nothing (-short, tools
// missing outside CI).
func needCluster(t *testing.T) {
	t.Helper()
	if kube == nil {
		clustertest.Shared(t)
	}
}

// providers serves the provider in check mode: each request its fast path
// serves is checked against the framework's answer.
var providers = map[string]func() (tfprotov6.ProviderServer, error){
	"gpuslice": provider.NewCheckedServer(provider.New("test")()),
}

// providerBlock configures the provider for the test cluster.
func providerBlock() string {
	return fmt.Sprintf(`
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

provider "gpuslice" {
  config_path = %q
}
`, kubeconfig)
}

func corev1ResourceName(s string) corev1.ResourceName { return corev1.ResourceName(s) }
