// Package connection is the provider block of the gpuslice provider: the
// cluster connection, with the arguments and KUBE_* environment variables
// of the hashicorp/kubernetes provider, turned into a client configuration.
package connection

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

// Model is the provider block: the cluster connection, named and
// behaving like the hashicorp/kubernetes provider's.
type Model struct {
	ConfigPath            types.String `tfsdk:"config_path"`
	ConfigPaths           types.List   `tfsdk:"config_paths"`
	ConfigContext         types.String `tfsdk:"config_context"`
	ConfigContextAuthInfo types.String `tfsdk:"config_context_auth_info"`
	ConfigContextCluster  types.String `tfsdk:"config_context_cluster"`
	Host                  types.String `tfsdk:"host"`
	Token                 types.String `tfsdk:"token"`
	ClusterCACertificate  types.String `tfsdk:"cluster_ca_certificate"`
	ClientCertificate     types.String `tfsdk:"client_certificate"`
	ClientKey             types.String `tfsdk:"client_key"`
	Insecure              types.Bool   `tfsdk:"insecure"`
	InventoryNamespace    types.String `tfsdk:"inventory_namespace"`
	TableFiles            types.List   `tfsdk:"table_files"`
	Exec                  *execModel   `tfsdk:"exec"`
}

type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}

// Attributes are the provider block's arguments.
func Attributes() map[string]schema.Attribute {
	str := func(desc, env string, sensitive bool) schema.StringAttribute {
		if env != "" {
			desc += " Environment: `" + env + "`."
		}
		return schema.StringAttribute{Optional: true, Sensitive: sensitive, Description: desc, MarkdownDescription: desc}
	}
	return map[string]schema.Attribute{
		"config_path":              str("Path to a kubeconfig file.", "KUBE_CONFIG_PATH", false),
		"config_paths":             schema.ListAttribute{ElementType: types.StringType, Optional: true, MarkdownDescription: "Kubeconfig files merged in order, like `KUBECONFIG`. Environment: `KUBE_CONFIG_PATHS` (separated like `PATH`)."},
		"config_context":           str("Kubeconfig context to use instead of the current one.", "KUBE_CTX", false),
		"config_context_auth_info": str("User of the kubeconfig to use instead of the context's.", "KUBE_CTX_AUTH_INFO", false),
		"config_context_cluster":   str("Cluster of the kubeconfig to use instead of the context's.", "KUBE_CTX_CLUSTER", false),
		"host":                     str("Kubernetes API server URL, e.g. `https://127.0.0.1:6443`.", "KUBE_HOST", false),
		"token":                    str("Bearer token.", "KUBE_TOKEN", true),
		"cluster_ca_certificate":   str("PEM of the CA that signed the API server's certificate.", "KUBE_CLUSTER_CA_CERT_DATA", false),
		"client_certificate":       str("PEM client certificate for TLS authentication.", "KUBE_CLIENT_CERT_DATA", false),
		"client_key":               str("PEM key of `client_certificate`.", "KUBE_CLIENT_KEY_DATA", true),
		"insecure":                 schema.BoolAttribute{Optional: true, MarkdownDescription: "Skip verifying the API server's certificate (tests only). Environment: `KUBE_INSECURE`."},
		"table_files":              schema.ListAttribute{ElementType: types.StringType, Optional: true, MarkdownDescription: "Table files of your own (YAML, the format of the repository's `schemas/tables`) extending the built-in GPU model, image, model and runtime tables, like the CLI's `--table`."},
		"inventory_namespace":      str("Namespace holding each resource's inventory of applied objects (default `gpuslice-system`).", "", false),
	}
}

// Blocks are the provider block's nested blocks.
func Blocks() map[string]schema.Block {
	return map[string]schema.Block{
		"exec": schema.SingleNestedBlock{
			MarkdownDescription: "Get credentials from a command (a client-go credential plugin), e.g. `aws eks get-token`.",
			Attributes: map[string]schema.Attribute{
				"api_version": schema.StringAttribute{Optional: true, MarkdownDescription: "API version of the credential plugin's ExecCredential, e.g. `client.authentication.k8s.io/v1beta1`."},
				"command":     schema.StringAttribute{Optional: true, MarkdownDescription: "Command to run."},
				"args":        schema.ListAttribute{ElementType: types.StringType, Optional: true, MarkdownDescription: "Arguments."},
				"env":         schema.MapAttribute{ElementType: types.StringType, Optional: true, MarkdownDescription: "Environment variables for the command."},
			},
		},
	}
}

// value returns the attribute's value, else the environment variable's:
// explicit configuration wins. unknown reports a value known only after
// apply.
func value(v types.String, env string) (s string, unknown bool) {
	if v.IsUnknown() {
		return "", true
	}
	if !v.IsNull() {
		return v.ValueString(), false
	}
	if env == "" {
		return "", false
	}
	return os.Getenv(env), false
}

// RestConfig builds the client configuration. skipped is set (and the
// config nil) when there is no cluster to talk to yet: a value is unknown
// until apply, or nothing is configured.
func (m Model) RestConfig() (cfg *rest.Config, skipped string, err error) {
	var unknown []string
	get := func(name string, v types.String, env string) string {
		s, u := value(v, env)
		if u {
			unknown = append(unknown, name)
		}
		return s
	}
	configPath := get("config_path", m.ConfigPath, "KUBE_CONFIG_PATH")
	var paths []string
	if !m.ConfigPaths.IsNull() {
		ps, u := tfvalue.Strings(m.ConfigPaths)
		if u {
			unknown = append(unknown, "config_paths")
		}
		paths = ps
	} else if env := os.Getenv("KUBE_CONFIG_PATHS"); env != "" {
		paths = filepath.SplitList(env)
	}
	if configPath != "" {
		paths = append([]string{configPath}, paths...)
	}
	overrides := &clientcmd.ConfigOverrides{}
	overrides.CurrentContext = get("config_context", m.ConfigContext, "KUBE_CTX")
	overrides.Context.AuthInfo = get("config_context_auth_info", m.ConfigContextAuthInfo, "KUBE_CTX_AUTH_INFO")
	overrides.Context.Cluster = get("config_context_cluster", m.ConfigContextCluster, "KUBE_CTX_CLUSTER")
	host := get("host", m.Host, "KUBE_HOST")
	overrides.ClusterInfo.Server = host
	if ca := get("cluster_ca_certificate", m.ClusterCACertificate, "KUBE_CLUSTER_CA_CERT_DATA"); ca != "" {
		overrides.ClusterInfo.CertificateAuthorityData = []byte(ca)
	}
	switch {
	case m.Insecure.IsUnknown():
		unknown = append(unknown, "insecure")
	case !m.Insecure.IsNull():
		overrides.ClusterInfo.InsecureSkipTLSVerify = m.Insecure.ValueBool()
	case os.Getenv("KUBE_INSECURE") != "":
		b, err := strconv.ParseBool(os.Getenv("KUBE_INSECURE"))
		if err != nil {
			return nil, "", fmt.Errorf("KUBE_INSECURE=%q is not true or false", os.Getenv("KUBE_INSECURE"))
		}
		overrides.ClusterInfo.InsecureSkipTLSVerify = b
	}
	if cert := get("client_certificate", m.ClientCertificate, "KUBE_CLIENT_CERT_DATA"); cert != "" {
		overrides.AuthInfo.ClientCertificateData = []byte(cert)
	}
	if key := get("client_key", m.ClientKey, "KUBE_CLIENT_KEY_DATA"); key != "" {
		overrides.AuthInfo.ClientKeyData = []byte(key)
	}
	overrides.AuthInfo.Token = get("token", m.Token, "KUBE_TOKEN")
	if m.Exec != nil {
		exec, u, err := m.Exec.config()
		if err != nil {
			return nil, "", err
		}
		if u {
			unknown = append(unknown, "exec")
		}
		overrides.AuthInfo.Exec = exec
	}
	if len(unknown) > 0 {
		return nil, fmt.Sprintf("the provider's %s is known only after apply", strings.Join(unknown, ", ")), nil
	}
	if len(paths) == 0 && host == "" {
		return inCluster()
	}
	for i, p := range paths {
		paths[i] = expandHome(p)
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: paths}
	if len(paths) == 1 {
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: paths[0]}
	}
	cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("build the cluster connection from %s: %w", describe(paths, host), err)
	}
	return cfg, "", nil
}

func (e *execModel) config() (*clientcmdapi.ExecConfig, bool, error) {
	if e.APIVersion.IsUnknown() || e.Command.IsUnknown() || e.Args.IsUnknown() || e.Env.IsUnknown() {
		return nil, true, nil
	}
	if e.Command.ValueString() == "" {
		return nil, false, fmt.Errorf("exec.command is empty: name the credential plugin to run (e.g. aws), or remove the exec block")
	}
	if e.APIVersion.ValueString() == "" {
		return nil, false, fmt.Errorf("exec.api_version is empty: set the plugin's ExecCredential version, e.g. client.authentication.k8s.io/v1beta1")
	}
	args, u := tfvalue.Strings(e.Args)
	if u {
		return nil, true, nil
	}
	out := &clientcmdapi.ExecConfig{APIVersion: e.APIVersion.ValueString(), Command: e.Command.ValueString(), Args: args, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	for k, v := range e.Env.Elements() {
		s, ok := v.(types.String)
		if !ok || s.IsUnknown() {
			return nil, true, nil
		}
		out.Env = append(out.Env, clientcmdapi.ExecEnvVar{Name: k, Value: s.ValueString()})
	}
	return out, false, nil
}

func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

func describe(paths []string, host string) string {
	if len(paths) > 0 {
		return "kubeconfig " + strings.Join(paths, ", ")
	}
	return "host " + host
}

// inCluster is the connection of a provider given none: in a pod (a GitOps
// runner's), its ServiceAccount's token and the API server's Service, as
// client-go finds them, with nothing to configure and no file to write.
func inCluster() (*rest.Config, string, error) {
	cfg, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, "the provider has no cluster connection configured", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("in-cluster connection (no config_path, host or KUBE_* given, in a pod): %w; mount the ServiceAccount token (automountServiceAccountToken) or configure the provider", err)
	}
	return cfg, "", nil
}
