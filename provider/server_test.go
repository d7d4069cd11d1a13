package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
)

// configOf is a configuration value of ty as Terraform sends it: set's
// attributes, every other one null, absent list blocks empty.
func configOf(ty cty.Type, set map[string]cty.Value) cty.Value {
	attrs := map[string]cty.Value{}
	for name, at := range ty.AttributeTypes() {
		switch v, ok := set[name]; {
		case ok:
			attrs[name] = v
		case at.IsListType() && at.ElementType().IsObjectType():
			attrs[name] = cty.ListValEmpty(at.ElementType())
		default:
			attrs[name] = cty.NullVal(at)
		}
	}
	return cty.ObjectVal(attrs)
}

// The fast path answers a configuration's validation only when the
// framework would report nothing; everything it is not sure of, the
// framework answers, naming what is wrong.
func TestFastValidationAgreesWithTheFramework(t *testing.T) {
	ctx := context.Background()
	p := New("test")()
	ps, err := newServer(p, true)()
	if err != nil {
		t.Fatal(err)
	}
	s := ps.(*server)
	w := s.types["gpuslice_workload"]
	attr := func(path ...string) cty.Type {
		ty := w.value
		for _, name := range path {
			ty = ty.AttributeType(name)
			if ty.IsListType() {
				ty = ty.ElementType()
			}
		}
		return ty
	}
	container := func(set map[string]cty.Value) cty.Value {
		if _, ok := set["image"]; !ok {
			set["image"] = cty.StringVal("ollama/ollama:0.24.0")
		}
		return configOf(attr("container"), set)
	}
	workload := func(set map[string]cty.Value) cty.Value {
		base := map[string]cty.Value{
			"namespace": cty.StringVal("team-a"), "name": cty.StringVal("llm"), "package": cty.StringVal("v100-8gi"),
			"container": container(map[string]cty.Value{}),
		}
		for k, v := range set {
			base[k] = v
		}
		return configOf(w.value, base)
	}
	cases := []struct {
		name   string
		config cty.Value
		// error is part of the framework's error, empty when valid.
		error string
	}{
		{"minimal", workload(nil), ""},
		{"every block", workload(map[string]cty.Value{
			"kind": cty.StringVal("statefulset"), "wait_for": cty.StringVal("scheduled"),
			"container": container(map[string]cty.Value{"image_pull_policy": cty.StringVal("IfNotPresent"),
				"port": cty.ListVal([]cty.Value{configOf(attr("container", "port"), map[string]cty.Value{"container_port": cty.NumberIntVal(11434)})})}),
			"expose":       configOf(attr("expose"), map[string]cty.Value{"port": cty.NumberIntVal(80)}),
			"model_volume": configOf(attr("model_volume"), map[string]cty.Value{"size": cty.StringVal("20Gi"), "mount_path": cty.StringVal("/models")}),
			"timeouts":     configOf(attr("timeouts"), map[string]cty.Value{"create": cty.StringVal("5m")}),
		}), ""},
		{"unknown values", workload(map[string]cty.Value{"kind": cty.UnknownVal(cty.String), "expose": cty.UnknownVal(attr("expose"))}), ""},
		{"one_of", workload(map[string]cty.Value{"kind": cty.StringVal("cronjob")}), "value must be one of"},
		{"one_of in a block", workload(map[string]cty.Value{"container": container(map[string]cty.Value{"image_pull_policy": cty.StringVal("Sometimes")})}), "value must be one of"},
		{"read-only attribute", workload(map[string]cty.Value{"phase": cty.StringVal("Running")}), "Read-Only"},
		{"required block", workload(map[string]cty.Value{"container": cty.NullVal(attr("container"))}), "must have a configuration value"},
		{"partly set block", workload(map[string]cty.Value{"expose": configOf(attr("expose"), map[string]cty.Value{"target_port": cty.NumberIntVal(8080)})}), "must be specified"},
		{"required in a list block", workload(map[string]cty.Value{"container": container(map[string]cty.Value{
			"port": cty.ListVal([]cty.Value{configOf(attr("container", "port"), map[string]cty.Value{"name": cty.StringVal("http")})})})}), "Missing Configuration for Required Attribute"},
		{"timeout", workload(map[string]cty.Value{"timeouts": configOf(attr("timeouts"), map[string]cty.Value{"create": cty.StringVal("five minutes")})}), "Time Duration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dv, err := encode(c.config, w.value)
			if err != nil {
				t.Fatal(err)
			}
			before := p.(*gpusliceProvider).fast.validate.Load()
			resp, err := s.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: "gpuslice_workload", Config: dv})
			if err != nil {
				t.Fatal(err)
			}
			fast := p.(*gpusliceProvider).fast.validate.Load() > before
			got := describeDiagnostics(resp.Diagnostics)
			switch {
			case c.error == "" && (!fast || len(resp.Diagnostics) > 0):
				t.Errorf("fast path used: %v, diagnostics %s; want the fast path and none", fast, got)
			case c.error != "" && fast:
				t.Errorf("the fast path took an invalid configuration (diagnostics %s)", got)
			case c.error != "" && !strings.Contains(got, c.error):
				t.Errorf("diagnostics %s, want the framework's error with %q", got, c.error)
			}
		})
	}
}

// A null list block and an empty one are the same to the engine; the
// framework hands it the null and gives Terraform the empty one.
func TestNullifyAndReifyBlocks(t *testing.T) {
	ps, err := newServer(New("test")(), false)()
	if err != nil {
		t.Fatal(err)
	}
	w := ps.(*server).types["gpuslice_workload"]
	port := w.value.AttributeType("container").AttributeType("port")
	empty := configOf(w.value, map[string]cty.Value{"container": configOf(w.value.AttributeType("container"), map[string]cty.Value{"port": cty.ListValEmpty(port.ElementType())})})
	null := nullifyBlocks(empty, w.def.Block)
	if got := null.GetAttr("container").GetAttr("port"); !got.IsNull() {
		t.Errorf("nullified port block = %#v, want null", got)
	}
	if !null.GetAttr("autoscaling").IsNull() {
		t.Errorf("a null single block changed")
	}
	if back := reifyBlocks(null, w.def.Block); !back.RawEquals(empty) {
		t.Errorf("reified %#v, want %#v", back, empty)
	}
	if _, err := encode(reifyBlocks(null, w.def.Block), w.value); err != nil {
		t.Errorf("encode: %v", err)
	}
}

// withDefaults fills what the configuration leaves null, in nested blocks
// too, and leaves what it sets.
func TestWithDefaults(t *testing.T) {
	ps, err := newServer(New("test")(), false)()
	if err != nil {
		t.Fatal(err)
	}
	w := ps.(*server).types["gpuslice_workload"]
	portType := w.value.AttributeType("container").AttributeType("port").ElementType()
	cfg := configOf(w.value, map[string]cty.Value{
		"kind": cty.StringVal("job"),
		"container": configOf(w.value.AttributeType("container"), map[string]cty.Value{"port": cty.ListVal([]cty.Value{
			configOf(portType, map[string]cty.Value{"container_port": cty.NumberIntVal(80)}),
		})}),
	})
	planned, changed, ok := withDefaults(cfg, cfg, w.def.Block)
	if !ok || !changed {
		t.Fatalf("withDefaults: changed %v, ok %v", changed, ok)
	}
	if got := planned.GetAttr("kind"); !got.RawEquals(cty.StringVal("job")) {
		t.Errorf("kind = %#v, want the configured job", got)
	}
	if got := planned.GetAttr("wait_for"); !got.RawEquals(cty.StringVal("ready")) {
		t.Errorf("wait_for = %#v, want the default ready", got)
	}
	if got := planned.GetAttr("container").GetAttr("port").Index(cty.NumberIntVal(0)).GetAttr("protocol"); !got.RawEquals(cty.StringVal("TCP")) {
		t.Errorf("port protocol = %#v, want the default TCP", got)
	}
	if again, changed, ok := withDefaults(planned, cfg, w.def.Block); !ok || changed || !again.RawEquals(planned) {
		t.Errorf("a second pass changed the value (changed %v, ok %v)", changed, ok)
	}
	fewer := configOf(w.value, map[string]cty.Value{"container": configOf(w.value.AttributeType("container"), nil)})
	if _, _, ok := withDefaults(planned, fewer, w.def.Block); ok {
		t.Errorf("a plan with a port block the configuration lacks lined up")
	}
}

// A state saved by this schema version is read on the fast path, the
// attributes it lacks null; one with an attribute the schema no longer has
// is the framework's, which drops it.
func TestFastUpgradeAgreesWithTheFramework(t *testing.T) {
	ctx := context.Background()
	p := New("test")()
	ps, err := newServer(p, true)()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, state string
		fast        bool
	}{
		{"current", `{"id":"team-a/llm","namespace":"team-a","name":"llm","package":"v100-8gi","kind":"deployment","container":{"image":"ollama/ollama:0.24.0","port":[{"container_port":11434,"name":"http","protocol":"TCP"}]},"timeouts":null}`, true},
		{"attributes missing", `{"id":"team-a/llm","namespace":"team-a","name":"llm"}`, true},
		{"attribute removed since", `{"id":"team-a/llm","namespace":"team-a","name":"llm","gone":"x"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := p.(*gpusliceProvider).fast.upgrade.Load()
			resp, err := ps.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{
				TypeName: "gpuslice_workload", RawState: &tfprotov6.RawState{JSON: []byte(c.state)}})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Diagnostics) > 0 {
				t.Errorf("diagnostics %s", describeDiagnostics(resp.Diagnostics))
			}
			if fast := p.(*gpusliceProvider).fast.upgrade.Load() > before; fast != c.fast {
				t.Errorf("served on the fast path: %v, want %v", fast, c.fast)
			}
			w := ps.(*server).types["gpuslice_workload"]
			v, ok := decode(resp.UpgradedState, w.value)
			if !ok || v.GetAttr("id").AsString() != "team-a/llm" || v.GetAttr("container").IsNull() != (c.name != "current") {
				t.Errorf("upgraded state %#v", v)
			}
		})
	}
}
