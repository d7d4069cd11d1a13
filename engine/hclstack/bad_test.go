package hclstack

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// base is a valid configuration the broken ones are made from.
const base = `
resource "gpuslice_package" "small" {
  name      = "v100-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}
`

const goodWorkload = `
resource "gpuslice_quota" "a" {
  namespace = "team-a"
  slices    = { "v100-8gi" = 1 }
}
resource "gpuslice_workload" "w" {
  namespace = "team-a"
  name      = "w"
  package   = gpuslice_package.small.name
  container {
    image = "ollama/ollama:0.24.0"
  }
}
`

const workloadV = `
resource "gpuslice_workload" "v" {
  namespace = "team-a"
  name      = "v"
  package   = "v100-8gi"
  container {
    image = "ollama/ollama:0.24.0"
  }
}
`

// nodePluginWith is a platform whose node_plugin block has the line attr
// (its line 10 after base).
func nodePluginWith(attr string) string {
	return "resource \"gpuslice_platform\" \"p\" {\n  node_plugin {\n" +
		"    image = \"registry.test/gpuslice/gpuslice-nodeplugin:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5\"\n" +
		"    " + attr + "\n  }\n}\n"
}

// reconcileWith is a platform whose reconcile block has git_url on line 9,
// stack on line 10 and extra on line 12 (after base).
func reconcileWith(gitURL, stack, extra string) string {
	return "resource \"gpuslice_platform\" \"p\" {\n  reconcile {\n    git_url = \"" + gitURL + "\"\n    stack = \"" + stack + "\"\n" +
		"    image = \"registry.test/gpuslice/gpuslice-reconcile:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5\"\n" +
		"    " + extra + "\n  }\n}\n"
}

// TestBrokenConfigs: each broken configuration yields exactly one error
// diagnostic, at the expected file:line:column, saying what is wrong.
func TestBrokenConfigs(t *testing.T) {
	cases := []struct {
		name string
		tf   string
		vars []string
		env  []string
		// at is "line:col" and want substrings of the first error.
		at   string
		want []string
		// errors is how many errors to expect when more than one; a typo
		// in a required argument is also a missing argument.
		errors int
	}{
		{"syntax error", base + "resource \"gpuslice_quota\" \"a\" {\n  namespace = \"x\"\n", nil, nil,
			"7:31", []string{"Unclosed configuration block"}, 0},
		{"unknown attribute", strings.Replace(base, "fraction  = 25", "fractoin  = 25", 1), nil, nil,
			"5:3", []string{"Unsupported argument", `Did you mean "fraction"?`}, 1},
		{"unknown block", base + strings.Replace(goodWorkload, "container {", "contaner {", 1), nil, nil,
			"16:3", []string{"Unsupported block type", `Did you mean "container"?`}, 2},
		{"unknown resource type", strings.Replace(base, "gpuslice_package", "gpuslice_pakage", 1), nil, nil,
			"2:10", []string{"Unknown resource type", `did you mean "gpuslice_package"?`}, 0},
		{"non-gpuslice resource", base + `resource "kubernetes_namespace" "x" {}`, nil, nil,
			"7:10", []string{"Unknown resource type", "manages gpuslice resources only"}, 0},
		{"fraction not offered", strings.Replace(base, "= 25", "= 30", 1), nil, nil,
			"5:15", []string{"gpuslice_package.small.fraction: Fraction not offered", "30 % is not a slice size the node plugins offer (25, 50, 100)"}, 0},
		{"fraction not a whole number", strings.Replace(base, "= 25", "= 12.5", 1), nil, nil,
			"5:15", []string{"gpuslice_package.small.fraction: Whole number required", "12.5"}, 0},
		{"wrong type", strings.Replace(base, "= 25", `= "big"`, 1), nil, nil,
			"5:15", []string{"Incorrect attribute value type", "a number is required"}, 0},
		{"missing required attribute", strings.Replace(base, "  gpu_model = \"Tesla V100-PCIE-32GB\"\n", "", 1), nil, nil,
			"2:37", []string{"Missing required argument", `"gpu_model" is required`}, 0},
		{"missing package reference", base + strings.Replace(goodWorkload, `{ "v100-8gi" = 1 }`, `{ "v100-4gi" = 1 }`, 1), nil, nil,
			"10:17", []string{`gpuslice_quota.a.slices["v100-4gi"]: Unknown package`, `did you mean "v100-8gi"?`}, 0},
		{"reference to undeclared resource", base + strings.Replace(goodWorkload, "gpuslice_package.small.name", "gpuslice_package.smal.name", 1), nil, nil,
			"15:15", []string{"Reference to undeclared resource", `did you mean "gpuslice_package.small"?`}, 0},
		{"cycle", base + "locals {\n  a = local.b\n  b = local.a\n}\n", nil, nil,
			"8:3", []string{"Cycle in references", "local.a → local.b → local.a"}, 0},
		{"negative quantity", base + strings.Replace(goodWorkload, `slices    = { "v100-8gi" = 1 }`, "slices    = { \"v100-8gi\" = 1 }\n  cpu_requests = \"-1\"", 1), nil, nil,
			"11:18", []string{"gpuslice_quota.a.cpu_requests: Negative quantity"}, 0},
		{"not a quantity", base + strings.Replace(goodWorkload, `image = "ollama/ollama:0.24.0"`, "image = \"ollama/ollama:0.24.0\"\n    memory_limit = \"4 gigs\"", 1), nil, nil,
			"18:20", []string{"gpuslice_workload.w.container.memory_limit: Invalid quantity", `"4 gigs"`}, 0},
		{"model KV cache type", base + strings.Replace(goodWorkload, "    image = \"ollama/ollama:0.24.0\"\n  }\n", "    image = \"ollama/ollama:0.24.0\"\n  }\n  model {\n    name          = \"llama3.2:3b\"\n    kv_cache_type = \"q5\"\n  }\n", 1), nil, nil,
			"21:21", []string{"gpuslice_workload.w.model.kv_cache_type: Invalid KV cache type", "use f16, q8_0 or q4_0"}, 0},
		{"model context length", base + strings.Replace(goodWorkload, "    image = \"ollama/ollama:0.24.0\"\n  }\n", "    image = \"ollama/ollama:0.24.0\"\n  }\n  model {\n    name           = \"llama3.2:3b\"\n    context_length = -1\n  }\n", 1), nil, nil,
			"21:22", []string{"gpuslice_workload.w.model.context_length: Invalid context length"}, 0},
		{"huge number", strings.Replace(base, "= 25", "= 1e99999999", 1), nil, nil,
			"5:15", []string{"gpuslice_package.small.fraction: Number out of range", "a number of about 10^99999999 is too large"}, 0},
		{"invalid name", strings.Replace(base, `"v100-8gi"`, `"V100_8GI"`, 1), nil, nil,
			"3:15", []string{"gpuslice_package.small.name: Invalid package name", "lowercase"}, 0},
		{"negative slice count", base + strings.Replace(goodWorkload, `"v100-8gi" = 1`, `"v100-8gi" = -2`, 1), nil, nil,
			"10:17", []string{`gpuslice_quota.a.slices["v100-8gi"]: Negative slice count`}, 0},
		{"computed attribute set", strings.Replace(base, "fraction  = 25", "fraction  = 25\n  memory_bytes = 8", 1), nil, nil,
			"6:3", []string{"Read-only attribute", "gpuslice_package.small.memory_bytes is computed"}, 0},
		{"memory and fraction disagree", strings.Replace(base, "fraction  = 25", "fraction  = 25\n  memory = \"6Gi\"", 1), nil, nil,
			"6:12", []string{"gpuslice_package.small.memory: Memory and fraction disagree", "25 % of a Tesla V100-PCIE-32GB is 8Gi, not 6Gi"}, 0},
		{"any-size memory not in steps", strings.Replace(base, "fraction  = 25", "memory = \"6000Mi\"", 1), nil, nil,
			"5:12", []string{"gpuslice_package.small.memory: Memory not a whole number of steps", "use 5888Mi or 6Gi"}, 0},
		{"package without a size", strings.Replace(base, "fraction  = 25", "", 1), nil, nil,
			"", []string{"Package size missing", "give the slice's size: fraction"}, 0},
		{"extended resource name of an any-size package", strings.Replace(base, "fraction  = 25", "memory = \"6Gi\"\n  extended_resource_name = \"gpuslice.dev/v100-6gi\"", 1), nil, nil,
			"6:28", []string{"gpuslice_package.small.extended_resource_name: Extended resource of a shared package", "v100-8gi is an any-size package",
				"the smallest any-size slice", "remove extended_resource_name, and run the pods as a gpuslice_workload of this package, or give them a ResourceClaimTemplate of class v100-8gi"}, 0},
		{"extended resource name of a time-sliced package", strings.Replace(base, "fraction  = 25", "sharing = \"time-sliced\"\n  replicas = 4\n  extended_resource_name = \"gpuslice.dev/v100-shared\"", 1), nil, nil,
			"7:28", []string{"gpuslice_package.small.extended_resource_name: Extended resource of a shared package", "v100-8gi is a time-sliced package",
				"all of the GPU's shares instead of one", "run the pods as a gpuslice_workload", "ResourceClaimTemplate"}, 0},
		{"no scheduler user", base + "resource \"gpuslice_platform\" \"p\" {\n  scheduler_users = []\n}\n", nil, nil,
			"8:21", []string{"gpuslice_platform.p.scheduler_users: No scheduler user", "a pod asking for a package by its extended resource name", "system:kube-scheduler"}, 0},
		{"scheduler user with a comma", base + "resource \"gpuslice_platform\" \"p\" {\n  scheduler_users = [\"system:kube-scheduler\", \"a,b\"]\n}\n", nil, nil,
			"8:47", []string{"gpuslice_platform.p.scheduler_users[1]: Invalid user name", `"a,b" contains a comma`}, 0},
		{"negative evict-after", base + nodePluginWith(`health_evict_after = "-5m"`), nil, nil,
			"10:26", []string{"gpuslice_platform.p.node_plugin.health_evict_after: Invalid duration", `"-5m" is negative`}, 0},
		{"reconcile: credentials in the URL", base + reconcileWith("https://bob:secret@git.test/s.git", "prod", ""), nil, nil,
			"9:15", []string{"gpuslice_platform.p.reconcile.git_url: Credentials in the Git URL", "readable by anyone who may read the Deployment"}, 0},
		{"reconcile: stack name", base + reconcileWith("https://git.test/s.git", "Prod_1", ""), nil, nil,
			"10:13", []string{"gpuslice_platform.p.reconcile.stack: Invalid stack name", "gpuslice-reconcile-<stack>"}, 0},
		{"reconcile: interval", base + reconcileWith("https://git.test/s.git", "prod", `interval = "500ms"`), nil, nil,
			"12:16", []string{"gpuslice_platform.p.reconcile.interval: Invalid interval", "at least 1s"}, 0},
		{"unparseable recovery", base + nodePluginWith(`health_recovery = "5 minutes"`), nil, nil,
			"10:23", []string{"gpuslice_platform.p.node_plugin.health_recovery: Invalid duration", `"5 minutes" is not a Go duration`, `"90s"`}, 0},
		{"zero recovery", base + nodePluginWith(`health_recovery = "0s"`), nil, nil,
			"10:23", []string{"gpuslice_platform.p.node_plugin.health_recovery: Invalid duration", "positive time"}, 0},
		{"time-sliced without replicas", strings.Replace(base, "fraction  = 25", "sharing = \"time-sliced\"", 1), nil, nil,
			"2:1", []string{"gpuslice_package.small.replicas: Invalid replicas", "2 to 64"}, 0},
		{"MIG profile typo", strings.Replace(strings.Replace(base, "fraction  = 25", "mig_profile = \"1g.5g\"", 1), "Tesla V100-PCIE-32GB", "NVIDIA A100-SXM4-40GB", 1), nil, nil,
			"5:17", []string{"gpuslice_package.small.mig_profile: Unknown MIG profile", `did you mean "1g.5gb"?`}, 0},
		{"MIG profile of a GPU without MIG", strings.Replace(base, "fraction  = 25", "mig_profile = \"1g.5gb\"", 1), nil, nil,
			"5:17", []string{"gpuslice_package.small.mig_profile: GPU model without MIG", "Tesla V100-PCIE-32GB has no Multi-Instance GPU (MIG) profiles"}, 0},
		{"MIG profile and fraction", strings.Replace(strings.Replace(base, "fraction  = 25", "fraction  = 25\n  mig_profile = \"1g.5gb\"", 1), "Tesla V100-PCIE-32GB", "NVIDIA A100-SXM4-40GB", 1), nil, nil,
			"5:15", []string{"gpuslice_package.small.fraction: Fraction of a MIG package", "remove fraction"}, 0},
		{"undeclared variable", strings.Replace(base, `"Tesla V100-PCIE-32GB"`, "var.model", 1), nil, nil,
			"4:15", []string{"Reference to undeclared input variable", "var.model is not declared"}, 0},
		{"required variable without value", base + "variable \"model\" {\n  type = string\n}\n", nil, nil,
			"7:1", []string{"No value for required variable", "-var 'model=…'", "TF_VAR_model"}, 0},
		{"variable validation", base + "variable \"ctx\" {\n  type    = number\n  default = 1024\n  validation {\n    condition     = var.ctx >= 2048\n    error_message = \"ctx must be at least 2048.\"\n  }\n}\n", nil, nil,
			"11:21", []string{"Invalid value for variable ctx", "ctx must be at least 2048."}, 0},
		{"-var for undeclared variable", base + "variable \"model\" {\n  default = \"x\"\n}\n", []string{"modle=y"}, nil,
			"", []string{"Value for undeclared variable", `-var modle sets "modle"`, `did you mean "model"?`}, 0},
		{"-var of the wrong type", base + "variable \"n\" {\n  type    = number\n  default = 1\n}\n", []string{"n=many"}, nil,
			"", []string{"Invalid value for variable n", "-var n"}, 0},
		{"TF_VAR of the wrong type", base + "variable \"n\" {\n  type    = number\n  default = 1\n}\n", nil, []string{"TF_VAR_n=many"},
			"", []string{"Invalid value for variable n", "environment variable TF_VAR_n"}, 0},
		{"reserved environment variable", base + strings.Replace(goodWorkload, `image = "ollama/ollama:0.24.0"`, "image = \"ollama/ollama:0.24.0\"\n    env = { LD_PRELOAD = \"/tmp/x.so\" }", 1), nil, nil,
			"18:13", []string{`gpuslice_workload.w.container.env["LD_PRELOAD"]: Reserved environment variable`}, 0},
		{"request above limit", base + strings.Replace(goodWorkload, `image = "ollama/ollama:0.24.0"`, "image = \"ollama/ollama:0.24.0\"\n    memory_request = \"8Gi\"\n    memory_limit = \"4Gi\"", 1), nil, nil,
			"18:22", []string{"gpuslice_workload.w.container.memory_request: Request above limit", "raise the limit"}, 0},
		{"preload without expose", base + strings.Replace(goodWorkload, "  container {", "  preload_models = [\"llama3.2:3b\"]\n  container {", 1), nil, nil,
			"16:20", []string{"gpuslice_workload.w.preload_models: Preloading needs a Service", "expose"}, 0},
		{"invalid kind", base + strings.Replace(goodWorkload, "  container {", "  kind = \"daemonset\"\n  container {", 1), nil, nil,
			"16:10", []string{"gpuslice_workload.w.kind: Invalid kind", `"daemonset"`}, 0},
		{"duplicate resource", base + base, nil, nil,
			"8:1", []string{"Duplicate declaration", "gpuslice_package.small is already declared"}, 0},
		{"count meta-argument", strings.Replace(base, "fraction  = 25", "fraction  = 25\n  count = 2", 1), nil, nil,
			"6:3", []string{"Unsupported meta-argument", "count is not supported by the gpuslice CLI"}, 0},
		{"unknown GPU model", strings.Replace(base, "Tesla V100-PCIE-32GB", "Tesla V100-PCIE-32G", 1), nil, nil,
			"4:15", []string{"Unknown GPU model", `did you mean "Tesla V100-PCIE-32GB"?`}, 0},
		{"invalid timeout", base + strings.Replace(goodWorkload, "  container {", "  timeout = \"ten minutes\"\n  container {", 1), nil, nil,
			"16:13", []string{"gpuslice_workload.w.timeout: Invalid timeout"}, 0},
		{"workload of an unknown package", base + strings.Replace(goodWorkload, "gpuslice_package.small.name", `"v100-9gi"`, 1), nil, nil,
			"15:15", []string{"gpuslice_workload.w.package: Unknown package", `did you mean "v100-8gi"?`}, 0},
		{"shared RWO volume", base + strings.Replace(goodWorkload, "  container {", "  replicas = 2\n  model_volume {\n    size = \"10Gi\"\n    mount_path = \"/models\"\n  }\n  container {", 1), nil, nil,
			"17:3", []string{"gpuslice_workload.w.model_volume.access_mode: Volume cannot be shared", `kind = "statefulset"`}, 0},
		{"value known only after apply", base + strings.Replace(goodWorkload, `name      = "w"`, "name      = \"w\"\n  labels    = { node = gpuslice_workload.v.node }", 1) + workloadV, nil, nil,
			"15:17", []string{`gpuslice_workload.w.labels["node"]: Value known only after apply`}, 0},
		{"data source in the CLI", base + "data \"gpuslice_gpus\" \"all\" {}\n", nil, nil,
			"7:1", []string{"Data sources are not read by the gpuslice CLI"}, 0},
		{"bad probe", base + strings.Replace(goodWorkload, `image = "ollama/ollama:0.24.0"`, "image = \"ollama/ollama:0.24.0\"\n    readiness_probe {\n      http_path = \"/health\"\n    }", 1), nil, nil,
			"18:5", []string{"gpuslice_workload.w.container.readiness_probe.port: Missing probe port"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(tc.tf), 0o644); err != nil {
				t.Fatal(err)
			}
			env := tc.env
			if env == nil {
				env = []string{}
			}
			_, diags := Load(dir, Options{VarOptions: VarOptions{Vars: tc.vars, Env: env}})
			errs := diags.Errors()
			want := max(tc.errors, 1)
			if len(errs) != want {
				t.Fatalf("want %d error(s), got %d:\n%v", want, len(errs), diags.Err())
			}
			d := errs[0]
			for _, e := range errs {
				if strings.Contains(e.Error(), tc.want[0]) {
					d = e
				}
			}
			text := d.Error()
			if tc.at != "" {
				want := "main.tf:" + tc.at
				if d.Range == nil || filepath.Base(d.Range.Filename)+":"+strconv.Itoa(d.Range.Line)+":"+strconv.Itoa(d.Range.Column) != want {
					t.Errorf("position: got %v, want %s\n%s", d.Range, want, text)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("diagnostic %q lacks %q", text, w)
				}
			}
		})
	}
	if len(cases) < 20 {
		t.Fatalf("the table must hold at least 20 broken configurations, has %d", len(cases))
	}
}
