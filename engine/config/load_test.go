package config

import (
	"testing"

	"github.com/zclconf/go-cty/cty"
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
	if got := s.Platform.Fractions; len(got) != 3 || got[0] != 25 || s.Platform.TenantLabel != "gpuslice.dev/tenant" || !s.Platform.AdmissionPolicies {
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
