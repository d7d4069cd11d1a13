package hclstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine/diag"
)

func TestLoadGoodConfig(t *testing.T) {
	c, diags := Load("testdata/good", Options{Stack: "demo", VarOptions: VarOptions{Vars: []string{"context_length=16384"}, Env: []string{}}})
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics:\n%v", diags.Err())
	}
	s := c.Stack
	if s.Name != "demo" || s.Platform == nil || len(s.Packages) != 2 || len(s.Quotas) != 1 || len(s.Workloads) != 1 {
		t.Fatalf("stack shape wrong: %+v", s)
	}
	if got := s.Platform.Fractions; len(got) != 3 || got[0] != 25 || s.Platform.TenantLabel != "gpuslice.dev/tenant" || !s.Platform.AdmissionPolicies ||
		len(s.Platform.SchedulerUsers) != 1 || s.Platform.SchedulerUsers[0] != "system:kube-scheduler" {
		t.Errorf("platform defaults not applied: %+v", s.Platform)
	}
	small := s.Packages[0]
	if small.Name != "v100-8gi" || small.MemoryBytes != 8<<30 || small.Memory != "8Gi" || small.ComputeShare != 25 {
		t.Errorf("package resolved wrong: %+v", small)
	}
	q := s.Quotas[0]
	if q.Namespace != "team-a" || q.Slices["v100-8gi"] != 2 || q.Slices["v100-16gi"] != 1 || q.CPURequests != "8" {
		t.Errorf("quota wrong: %+v", q)
	}
	w := s.Workloads[0]
	if w.Namespace != "team-a" || w.Package != "v100-8gi" || w.Kind != "deployment" || w.Replicas != 1 || w.WaitFor != "ready" || w.Timeout != "10m" {
		t.Errorf("workload wrong: %+v", w)
	}
	if w.Container.Env["OLLAMA_CONTEXT_LENGTH"] != "16384" || w.Labels["team"] != "a" {
		t.Errorf("-var or locals not applied: env %v labels %v", w.Container.Env, w.Labels)
	}
	if len(w.Container.Ports) != 1 || w.Container.Ports[0].Name != "http" || w.Container.Ports[0].Protocol != "TCP" {
		t.Errorf("port defaults not applied: %+v", w.Container.Ports)
	}
	if p := w.Container.ReadinessProbe; p == nil || p.PeriodSeconds != 10 || p.FailureThreshold != 3 {
		t.Errorf("probe defaults not applied: %+v", p)
	}
	if w.ModelVolume == nil || w.ModelVolume.AccessMode != "ReadWriteOnce" || w.Expose == nil || w.Expose.Type != "ClusterIP" {
		t.Errorf("block defaults not applied: %+v %+v", w.ModelVolume, w.Expose)
	}
	if w.Address != "gpuslice_workload.ollama" {
		t.Errorf("address = %q", w.Address)
	}
	outputs := map[string]cty.Value{}
	for _, o := range c.Outputs {
		outputs[o.Name] = o.Value
	}
	if v := outputs["slice_memory"]; !v.IsKnown() || v.AsString() != "8Gi" {
		t.Errorf("output slice_memory = %#v", v)
	}
	if v := outputs["service"]; !v.IsKnown() || v.AsString() != "ollama.team-a.svc:11434" {
		t.Errorf("output service = %#v", v)
	}
	if v := outputs["node"]; v.IsKnown() {
		t.Errorf("output node should be unknown before apply, got %#v", v)
	}
}

// The quickstart calls the llm-on-slice module: its workload joins the
// stack under a module address with the inputs the root passed, and its
// outputs reach the root's once apply reports the computed attributes.
func TestLoadLocalModule(t *testing.T) {
	c, diags := Load("../../examples/quickstart", Options{VarOptions: VarOptions{Vars: []string{"wait_for=scheduled", "node_plugin_image=registry.test/gpuslice/gpuslice-nodeplugin:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5"}, Env: []string{}}})
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics:\n%v", diags.Err())
	}
	if len(c.Stack.Workloads) != 1 {
		t.Fatalf("workloads: %+v", c.Stack.Workloads)
	}
	w := c.Stack.Workloads[0]
	if w.Address != "module.ollama.gpuslice_workload.llm" || w.Namespace != "team-a" || w.Package != "v100-8gi" || w.WaitFor != "scheduled" ||
		w.Container.Env["OLLAMA_CONTEXT_LENGTH"] != "16384" || w.Model == nil || w.Model.ContextLength != 16384 {
		t.Fatalf("module workload = %+v", w)
	}
	if d := c.Locate(diag.Diagnostic{Address: w.Address, Attribute: "container.image"}); d.Range == nil || !strings.HasSuffix(d.Range.Filename, "modules/llm-on-slice/main.tf") {
		t.Errorf("a module resource's attribute is located at %+v", d.Range)
	}
	outs, ds := c.EvalOutputs(map[string]map[string]string{w.Address: {"node": "gpu-node-1", "device": "gpu-0-25pct-1", "claim": "c", "service_address": "ollama.team-a.svc:11434"}})
	if ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	got := map[string]string{}
	for _, o := range outs {
		if o.Value.IsKnown() && o.Value.Type() == cty.String {
			got[o.Name] = o.Value.AsString()
		}
	}
	if got["node"] != "gpu-node-1" || got["slice"] != "gpu-0-25pct-1" || got["service_address"] != "ollama.team-a.svc:11434" {
		t.Errorf("outputs after apply = %v", got)
	}
}

func TestModuleErrors(t *testing.T) {
	for _, c := range []struct{ name, tf, want string }{
		{"registry source", `module "m" { source = "hashicorp/consul/aws" }`, "Only local modules"},
		{"missing dir", `module "m" { source = "./nowhere" }`, "Module not found"},
		{"unknown input", `module "m" {
  source    = "../../../examples/modules/llm-on-slice"
  namespace = "a"
  package   = "p"
  contex_length = 1
}`, `has no variable "contex_length" (did you mean "context_length"?)`},
		{"count", `module "m" {
  source = "../../../examples/modules/llm-on-slice"
  count  = 2
}`, "Unsupported module argument"},
		{"undeclared module", `output "x" { value = module.nope.y }`, "Reference to undeclared module"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A module source is relative to the calling configuration.
			dir := t.TempDir()
			wd, _ := os.Getwd()
			examples, _ := filepath.Rel(dir, filepath.Join(wd, "../../examples"))
			tf := strings.ReplaceAll(c.tf, "../../../examples", examples)
			os.WriteFile(filepath.Join(dir, "main.tf"), []byte(tf), 0o644)
			_, diags := Load(dir, Options{VarOptions: VarOptions{Env: []string{}}})
			if !diags.HasErrors() || !strings.Contains(diags.Err().Error(), c.want) {
				t.Fatalf("diagnostics = %v, want %q", diags, c.want)
			}
		})
	}
}

// TF_VAR_ variables a configuration does not declare are ignored, as
// Terraform does: `gpuslice dev env` exports the quickstart's for every
// configuration the shell applies. Set in the environment, the quickstart's
// are read.
func TestEnvironmentVariablesForOtherConfigurations(t *testing.T) {
	image := "registry.test/gpuslice/gpuslice-nodeplugin:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5"
	c, diags := Load("../../examples/quickstart", Options{VarOptions: VarOptions{Env: []string{
		"TF_VAR_node_plugin_image=" + image, `TF_VAR_node_plugin_env={A="1"}`, "TF_VAR_someone_elses=1",
	}}})
	if len(diags) > 0 {
		t.Fatalf("diagnostics for environment variables: %v", diags)
	}
	np := c.Stack.Platform.NodePlugin
	if np == nil || np.Image != image || np.Env["A"] != "1" {
		t.Errorf("node plugin from TF_VAR_*: %+v", np)
	}
}

// A configuration without outputs lets go of its graph, values and syntax
// trees once loaded (a plan of thousands of resources holds their specs
// and the files' text), and a diagnostic found later is still located at
// the attribute, in a file with other blocks before it.
func TestLocateAfterLoadLetGo(t *testing.T) {
	dir := t.TempDir()
	src := `# the packages
resource "gpuslice_package" "small" {
  name      = "v100-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_workload" "llm" {
  namespace = "team-a"
  name      = "llm"
  package   = gpuslice_package.small.name
  container {
    image = "ollama/ollama:0.24.0"
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, diags := Load(dir, Options{Stack: "demo", VarOptions: VarOptions{Env: []string{}}})
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics:\n%v", diags.Err())
	}
	if n := c.resources["gpuslice_workload.llm"]; c.root != nil || n.value != cty.NilVal || n.refs != nil {
		t.Fatal("a configuration without outputs kept its graph or values after loading")
	}
	d := c.Locate(diag.Diagnostic{Address: "gpuslice_workload.llm", Attribute: "container.image"})
	if d.Range == nil || d.Range.Filename != filepath.Join(dir, "main.tf") || d.Range.Line != 13 || d.Range.Column != 13 {
		t.Errorf("container.image located at %+v, want main.tf line 13, column 13", d.Range)
	}
	d = c.Locate(diag.Diagnostic{Address: "gpuslice_workload.llm", Attribute: "container.cpu_request"})
	if d.Range == nil || d.Range.Line != 12 {
		t.Errorf("container.cpu_request (not written) located at %+v, want the container block, line 12", d.Range)
	}
}

// A configuration with outputs keeps its graph to evaluate them again
// after apply, but not its resources' syntax trees (parsed again to decode
// each): diagnostics are still located, outputs evaluated.
func TestOutputsWithoutSyntaxTrees(t *testing.T) {
	dir := t.TempDir()
	src := `resource "gpuslice_package" "small" {
  name      = "v100-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_workload" "llm" {
  namespace = "team-a"
  name      = "llm"
  package   = gpuslice_package.small.name
  container {
    image = "ollama/ollama:0.24.0"
  }
}

output "package" {
  value = gpuslice_workload.llm.package
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, diags := Load(dir, Options{Stack: "demo", VarOptions: VarOptions{Env: []string{}}})
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics:\n%v", diags.Err())
	}
	if c.root == nil {
		t.Fatal("a configuration with outputs let go of its graph")
	}
	d := c.Locate(diag.Diagnostic{Address: "gpuslice_workload.llm", Attribute: "container.image"})
	if d.Range == nil || d.Range.Line != 12 || d.Range.Column != 13 {
		t.Errorf("container.image located at %+v, want main.tf line 12, column 13", d.Range)
	}
	outs, diags := c.EvalOutputs(nil)
	if diags.HasErrors() || len(outs) != 1 || !outs[0].Value.IsKnown() || outs[0].Value.AsString() != "v100-8gi" {
		t.Errorf("outputs evaluated again: %v, %v", outs, diags.Err())
	}
}
