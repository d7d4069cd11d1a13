package connection

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func clearKubeEnv(t *testing.T) {
	for _, k := range []string{"KUBE_CONFIG_PATH", "KUBE_CONFIG_PATHS", "KUBE_CTX", "KUBE_CTX_AUTH_INFO", "KUBE_CTX_CLUSTER", "KUBE_HOST",
		"KUBE_TOKEN", "KUBE_CLUSTER_CA_CERT_DATA", "KUBE_CLIENT_CERT_DATA", "KUBE_CLIENT_KEY_DATA", "KUBE_INSECURE", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
		t.Setenv(k, "")
	}
}

func nullModel() Model {
	return Model{
		ConfigPath: types.StringNull(), ConfigPaths: types.ListNull(types.StringType), ConfigContext: types.StringNull(),
		ConfigContextAuthInfo: types.StringNull(), ConfigContextCluster: types.StringNull(), Host: types.StringNull(),
		Token: types.StringNull(), ClusterCACertificate: types.StringNull(), ClientCertificate: types.StringNull(),
		ClientKey: types.StringNull(), Insecure: types.BoolNull(), InventoryNamespace: types.StringNull(), TableFiles: types.ListNull(types.StringType),
	}
}

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: file-token}
contexts:
- name: ctx-a
  context: {cluster: a, user: u}
- name: ctx-b
  context: {cluster: b, user: u}
current-context: ctx-a
`

func writeKubeconfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Nothing configured: no kubeconfig is read (not even $KUBECONFIG or
// ~/.kube/config), the cluster is skipped with the reason.
func TestConnectionNothingConfigured(t *testing.T) {
	clearKubeEnv(t)
	t.Setenv("KUBECONFIG", writeKubeconfig(t))
	cfg, skipped, err := nullModel().RestConfig()
	if err != nil || cfg != nil || skipped == "" {
		t.Fatalf("got cfg %v, skipped %q, err %v; want no config and a reason", cfg, skipped, err)
	}
}

func TestConnectionEnvironment(t *testing.T) {
	clearKubeEnv(t)
	t.Setenv("KUBE_CONFIG_PATH", writeKubeconfig(t))
	t.Setenv("KUBE_CTX", "ctx-b")
	cfg, _, err := nullModel().RestConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://b.example:6443" || cfg.BearerToken != "file-token" {
		t.Errorf("host %q token %q; want context ctx-b from KUBE_CTX", cfg.Host, cfg.BearerToken)
	}
}

// Explicit arguments win over the environment.
func TestConnectionExplicitWins(t *testing.T) {
	clearKubeEnv(t)
	t.Setenv("KUBE_CONFIG_PATH", writeKubeconfig(t))
	t.Setenv("KUBE_CTX", "ctx-b")
	t.Setenv("KUBE_TOKEN", "env-token")
	m := nullModel()
	m.ConfigContext = types.StringValue("ctx-a")
	m.Token = types.StringValue("explicit-token")
	cfg, _, err := m.RestConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://a.example:6443" || cfg.BearerToken != "explicit-token" {
		t.Errorf("host %q token %q; want ctx-a and the explicit token", cfg.Host, cfg.BearerToken)
	}
}

func TestConnectionHostOnly(t *testing.T) {
	clearKubeEnv(t)
	m := nullModel()
	m.Host = types.StringValue("https://c.example:6443")
	m.Token = types.StringValue("t")
	m.Insecure = types.BoolValue(true)
	m.Exec = &execModel{APIVersion: types.StringValue("client.authentication.k8s.io/v1beta1"), Command: types.StringValue("get-token"),
		Args: types.ListValueMust(types.StringType, []attr.Value{types.StringValue("--cluster"), types.StringValue("c")}), Env: types.MapNull(types.StringType)}
	cfg, _, err := m.RestConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://c.example:6443" || !cfg.Insecure || cfg.ExecProvider == nil || cfg.ExecProvider.Command != "get-token" || len(cfg.ExecProvider.Args) != 2 {
		t.Errorf("got host %q insecure %v exec %+v", cfg.Host, cfg.Insecure, cfg.ExecProvider)
	}
}

// A value known only after apply (the cluster is created in the same run)
// skips the cluster at plan time instead of failing.
func TestConnectionUnknown(t *testing.T) {
	clearKubeEnv(t)
	m := nullModel()
	m.Host = types.StringUnknown()
	cfg, skipped, err := m.RestConfig()
	if err != nil || cfg != nil || skipped == "" {
		t.Fatalf("got cfg %v, skipped %q, err %v; want a skip naming host", cfg, skipped, err)
	}
}

func TestConnectionBadPath(t *testing.T) {
	clearKubeEnv(t)
	m := nullModel()
	m.ConfigPath = types.StringValue(filepath.Join(t.TempDir(), "missing"))
	if _, _, err := m.RestConfig(); err == nil {
		t.Fatal("a missing kubeconfig must be an error")
	}
}

// Given nothing, the provider uses its pod's ServiceAccount; outside a pod
// it says nothing is configured, and in a pod without a token it says so.
func TestInCluster(t *testing.T) {
	clearKubeEnv(t)
	cfg, skipped, err := nullModel().RestConfig()
	if cfg != nil || err != nil || skipped != "the provider has no cluster connection configured" {
		t.Fatalf("outside a pod: %v, %q, %v; want skipped, no error", cfg, skipped, err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	cfg, skipped, err = nullModel().RestConfig()
	if _, statErr := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token"); statErr == nil {
		// this test runs in a pod: its token is used
		if cfg == nil || skipped != "" || err != nil || cfg.Host != "https://10.96.0.1:443" {
			t.Fatalf("in a pod with a token: %v, %q, %v; want the in-cluster config", cfg, skipped, err)
		}
		return
	}
	if cfg != nil || skipped != "" || err == nil || !strings.Contains(err.Error(), "automountServiceAccountToken") {
		t.Fatalf("in a pod without a token: %v, %q, %v; want an error naming automountServiceAccountToken", cfg, skipped, err)
	}
}
