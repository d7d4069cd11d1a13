package provider

// The fast path in front of the real provider, without a control plane:
// the provider configured without a cluster connection (the plan's cluster
// checks skipped), served in check mode, so every fast answer below is
// also compared with the framework's. The acceptance tests run the same
// check mode against the local control plane.

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	engineschema "github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/provider/internal/fastpath"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
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

func dynamic(t *testing.T, v cty.Value) *tfprotov6.DynamicValue {
	t.Helper()
	b, err := ctymsgpack.Marshal(v, v.Type())
	if err != nil {
		t.Fatal(err)
	}
	return &tfprotov6.DynamicValue{MsgPack: b}
}

func undynamic(t *testing.T, dv *tfprotov6.DynamicValue, ty cty.Type) cty.Value {
	t.Helper()
	if dv == nil {
		t.Fatal("no value")
	}
	v, err := ctymsgpack.Unmarshal(dv.MsgPack, ty)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// testServer is the provider served in a mode, with the cty types of its
// resources' and data sources' values and identities.
type testServer struct {
	tfprotov6.ProviderServer
	p         *gpusliceProvider
	provider  cty.Type
	types     map[string]cty.Type
	identity  map[string]cty.Type
	dataTypes map[string]cty.Type
}

func serve(t *testing.T, mode fastpath.Mode) *testServer {
	t.Helper()
	ctx := context.Background()
	p := New("test")().(*gpusliceProvider)
	ps, err := newServer(p, mode)()
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{ProviderServer: ps, p: p, types: map[string]cty.Type{}, identity: map[string]cty.Type{}, dataTypes: map[string]cty.Type{}}
	schemas, err := ps.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil || len(schemas.Diagnostics) > 0 {
		t.Fatalf("provider schema: %v %v", err, schemas.Diagnostics)
	}
	s.provider = ctyType(t, schemas.Provider.ValueType())
	for name, sc := range schemas.ResourceSchemas {
		s.types[name] = ctyType(t, sc.ValueType())
	}
	for name, sc := range schemas.DataSourceSchemas {
		s.dataTypes[name] = ctyType(t, sc.ValueType())
	}
	ids, err := ps.GetResourceIdentitySchemas(ctx, &tfprotov6.GetResourceIdentitySchemasRequest{})
	if err != nil || len(ids.Diagnostics) > 0 {
		t.Fatalf("identity schemas: %v %v", err, ids.Diagnostics)
	}
	for name, sc := range ids.IdentitySchemas {
		s.identity[name] = ctyType(t, sc.ValueType())
	}
	return s
}

func ctyType(t *testing.T, ty tftypes.Type) cty.Type {
	t.Helper()
	c, err := tfvalue.CtyType(ty)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// configureWithoutCluster configures the provider with no connection (and
// none from the environment): plans run their checks without a cluster,
// reads keep the state.
func (s *testServer) configureWithoutCluster(t *testing.T) {
	t.Helper()
	for _, env := range []string{"KUBE_CONFIG_PATH", "KUBE_CONFIG_PATHS", "KUBE_CTX", "KUBE_CTX_AUTH_INFO", "KUBE_CTX_CLUSTER", "KUBE_HOST",
		"KUBE_TOKEN", "KUBE_CLUSTER_CA_CERT_DATA", "KUBE_CLIENT_CERT_DATA", "KUBE_CLIENT_KEY_DATA", "KUBE_INSECURE"} {
		t.Setenv(env, "")
	}
	resp, err := s.ConfigureProvider(context.Background(), &tfprotov6.ConfigureProviderRequest{Config: dynamic(t, configOf(s.provider, nil))})
	if err != nil || len(resp.Diagnostics) > 0 {
		t.Fatalf("configure: %v %s", err, describe(resp.Diagnostics))
	}
	if d := s.p.currentData(); d == nil || d.engine != nil {
		t.Fatalf("the provider was configured with a cluster")
	}
}

func describe(ds []*tfprotov6.Diagnostic) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Severity.String()+" "+d.Summary+": "+d.Detail)
	}
	return "[" + strings.Join(out, "; ") + "]"
}

func served(p *gpusliceProvider) [4]int64 {
	return [4]int64{p.fast.Validate.Load(), p.fast.Upgrade.Load(), p.fast.Read.Load(), p.fast.Plan.Load()}
}

// examples are a configuration of each resource type.
func (s *testServer) examples() map[string]cty.Value {
	workload, platform := s.types["gpuslice_workload"], s.types["gpuslice_platform"]
	return map[string]cty.Value{
		"gpuslice_package": configOf(s.types["gpuslice_package"], map[string]cty.Value{
			"name": cty.StringVal("v100-8gi"), "gpu_model": cty.StringVal("Tesla V100-PCIE-32GB"), "fraction": cty.NumberIntVal(25)}),
		"gpuslice_quota": configOf(s.types["gpuslice_quota"], map[string]cty.Value{
			"namespace": cty.StringVal("team-a"), "slices": cty.MapVal(map[string]cty.Value{"v100-8gi": cty.NumberIntVal(2)}),
			"cpu_requests": cty.StringVal("8"), "memory_requests": cty.StringVal("32Gi")}),
		"gpuslice_workload": configOf(workload, map[string]cty.Value{
			"namespace": cty.StringVal("team-a"), "name": cty.StringVal("llm"), "package": cty.StringVal("v100-8gi"),
			"container": configOf(workload.AttributeType("container"), map[string]cty.Value{"image": cty.StringVal("ollama/ollama:0.24.0")})}),
		"gpuslice_platform": configOf(platform, map[string]cty.Value{
			"fractions": cty.ListVal([]cty.Value{cty.NumberIntVal(25), cty.NumberIntVal(50), cty.NumberIntVal(100)}),
			"node_plugin": configOf(platform.AttributeType("node_plugin"), map[string]cty.Value{
				"image": cty.StringVal("registry.example.com/gpuslice/gpuslice-nodeplugin:0.1.0"), "driver_root": cty.StringVal("/")})}),
	}
}

// applied is the state an apply of planned leaves: what apply computes
// set (the id, from the identity's attributes; the rest null).
func applied(t *testing.T, typeName string, planned cty.Value, identity cty.Type) (state, id cty.Value) {
	t.Helper()
	def, ok := engineschema.ResourceByType(typeName)
	if !ok {
		t.Fatalf("no resource %s", typeName)
	}
	var parts []string
	attrs := map[string]cty.Value{}
	for _, name := range def.Identity {
		v := planned.GetAttr(name)
		if !v.IsKnown() || v.IsNull() {
			t.Fatalf("identity attribute %s of the plan is %#v", name, v)
		}
		parts = append(parts, v.AsString())
		attrs[name] = v
	}
	state, err := cty.Transform(planned, func(p cty.Path, v cty.Value) (cty.Value, error) {
		switch {
		case v.IsKnown():
			return v, nil
		case len(p) == 1 && p.Equals(cty.GetAttrPath("id")):
			return cty.StringVal(strings.Join(parts, "/")), nil
		}
		return cty.NullVal(v.Type()), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return state, cty.ObjectVal(attrs)
}

// Every resource type's validation, state upgrade and no-change plan is
// served on the fast path, each answer the framework's too (check mode);
// without a cluster to read, reads are the framework's, which keeps the
// state.
func TestFastPathServesEveryResourceWithoutACluster(t *testing.T) {
	ctx := context.Background()
	s := serve(t, fastpath.Check)
	s.configureWithoutCluster(t)
	if only := s.ProviderServer.(*fastpath.Server).FrameworkOnly(); len(only) > 0 {
		t.Fatalf("resources left to the framework: %v", only)
	}
	examples := s.examples()
	if len(examples) != len(s.types) {
		t.Fatalf("examples of %d resource types, the provider has %d", len(examples), len(s.types))
	}
	for name, cfg := range examples {
		t.Run(name, func(t *testing.T) {
			ty, idType := s.types[name], s.identity[name]
			before := served(s.p)
			validate, err := s.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: name, Config: dynamic(t, cfg)})
			if err != nil || len(validate.Diagnostics) > 0 {
				t.Fatalf("validate: %v %s", err, describe(validate.Diagnostics))
			}

			create, err := s.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: name, Config: dynamic(t, cfg),
				PriorState: dynamic(t, cty.NullVal(ty)), ProposedNewState: dynamic(t, cfg)})
			if err != nil || hasErrors(create.Diagnostics) {
				t.Fatalf("plan to create: %v %s", err, describe(create.Diagnostics))
			}
			state, identity := applied(t, name, undynamic(t, create.PlannedState, ty), idType)

			plan, err := s.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: name, Config: dynamic(t, cfg),
				PriorState: dynamic(t, state), ProposedNewState: dynamic(t, state),
				PriorIdentity: &tfprotov6.ResourceIdentityData{IdentityData: dynamic(t, identity)}})
			if err != nil || hasErrors(plan.Diagnostics) {
				t.Fatalf("plan: %v %s", err, describe(plan.Diagnostics))
			}
			if got := undynamic(t, plan.PlannedState, ty); !got.RawEquals(state) {
				t.Errorf("no-change plan %#v, want the state %#v", got, state)
			}

			js, err := ctyjson.Marshal(state, ty)
			if err != nil {
				t.Fatal(err)
			}
			upgrade, err := s.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{TypeName: name, Version: 0, RawState: &tfprotov6.RawState{JSON: js}})
			if err != nil || len(upgrade.Diagnostics) > 0 {
				t.Fatalf("upgrade: %v %s", err, describe(upgrade.Diagnostics))
			}
			if got := undynamic(t, upgrade.UpgradedState, ty); !got.RawEquals(state) {
				t.Errorf("upgraded state %#v, want %#v", got, state)
			}

			read, err := s.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: name, CurrentState: dynamic(t, state),
				CurrentIdentity: &tfprotov6.ResourceIdentityData{IdentityData: dynamic(t, identity)}})
			if err != nil || len(read.Diagnostics) > 0 {
				t.Fatalf("read: %v %s", err, describe(read.Diagnostics))
			}
			if got := undynamic(t, read.NewState, ty); !got.RawEquals(state) {
				t.Errorf("read without a cluster changed the state to %#v", got)
			}
			// A state without identity (written before identities, or by a
			// client that keeps none) is kept too, and gets its identity.
			read, err = s.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: name, CurrentState: dynamic(t, state)})
			if err != nil || len(read.Diagnostics) > 0 {
				t.Fatalf("read without identity: %v %s", err, describe(read.Diagnostics))
			}
			if got := undynamic(t, read.NewState, ty); !got.RawEquals(state) {
				t.Errorf("read without a cluster or identity changed the state to %#v", got)
			}
			if read.NewIdentity == nil || !undynamic(t, read.NewIdentity.IdentityData, idType).RawEquals(identity) {
				t.Errorf("read without identity gave the identity %v, want %#v", read.NewIdentity, identity)
			}

			after := served(s.p)
			if want := [4]int64{before[0] + 1, before[1] + 1, before[2], before[3] + 1}; after != want {
				t.Errorf("served on the fast path (validate, upgrade, read, plan): %v more, want %v more", sub(after, before), sub(want, before))
			}
		})
	}
}

func sub(a, b [4]int64) [4]int64 {
	return [4]int64{a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3]}
}

func hasErrors(ds []*tfprotov6.Diagnostic) bool {
	for _, d := range ds {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			return true
		}
	}
	return false
}

// The data sources are the framework's: the fast path's server answers
// their validation and reads exactly as the framework's own does.
func TestFastPathLeavesDataSourcesToTheFramework(t *testing.T) {
	ctx := context.Background()
	fast, framework := serve(t, fastpath.Check), serve(t, fastpath.Off)
	if _, ok := framework.ProviderServer.(*fastpath.Server); ok {
		t.Fatal("mode off served through the fast path")
	}
	fast.configureWithoutCluster(t)
	framework.configureWithoutCluster(t)
	if len(fast.dataTypes) != 2 {
		t.Fatalf("%d data sources, want gpuslice_capacity and gpuslice_gpus", len(fast.dataTypes))
	}
	for name, ty := range fast.dataTypes {
		t.Run(name, func(t *testing.T) {
			before := served(fast.p)
			nulls := map[string]cty.Value{} // (their lists are computed attributes, not blocks)
			for attr, at := range ty.AttributeTypes() {
				nulls[attr] = cty.NullVal(at)
			}
			cfg := dynamic(t, cty.ObjectVal(nulls))
			for _, s := range []*testServer{fast, framework} {
				v, err := s.ValidateDataResourceConfig(ctx, &tfprotov6.ValidateDataResourceConfigRequest{TypeName: name, Config: cfg})
				if err != nil || len(v.Diagnostics) > 0 {
					t.Fatalf("validate: %v %s", err, describe(v.Diagnostics))
				}
			}
			var reads []*tfprotov6.ReadDataSourceResponse
			for _, s := range []*testServer{fast, framework} {
				r, err := s.ReadDataSource(ctx, &tfprotov6.ReadDataSourceRequest{TypeName: name, Config: cfg})
				if err != nil {
					t.Fatal(err)
				}
				reads = append(reads, r)
			}
			if f, s := describe(reads[0].Diagnostics), describe(reads[1].Diagnostics); f != s || !strings.Contains(f, "No cluster") {
				t.Errorf("read without a cluster: %s, the framework's %s; want both to say there is no cluster", f, s)
			}
			if after := served(fast.p); after != before {
				t.Errorf("the fast path served %v of a data source's requests", sub(after, before))
			}
		})
	}
}

// GPUSLICE_PROVIDER_FAST_PATH=off serves every request through the
// framework; check compares; anything else is refused, naming the
// variable.
func TestFastPathMode(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		value string
		fast  bool
		error string
	}{{"", true, ""}, {"on", true, ""}, {"off", false, ""}, {"OFF", false, ""}, {"check", true, ""}, {"no", false, "GPUSLICE_PROVIDER_FAST_PATH=\"no\""}} {
		t.Run(c.value, func(t *testing.T) {
			t.Setenv(fastpath.EnvVar, c.value)
			p := New("test")().(*gpusliceProvider)
			ps, err := NewServer(p)()
			if c.error != "" {
				if err == nil || !strings.Contains(err.Error(), c.error) {
					t.Fatalf("error %v, want one naming %s", err, c.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := serve(t, fastpath.Off) // for the types only
			cfg := s.examples()["gpuslice_package"]
			resp, err := ps.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: "gpuslice_package", Config: dynamic(t, cfg)})
			if err != nil || len(resp.Diagnostics) > 0 {
				t.Fatalf("validate: %v %s", err, describe(resp.Diagnostics))
			}
			if fast := p.fast.Validate.Load() > 0; fast != c.fast {
				t.Errorf("served on the fast path: %v, want %v", fast, c.fast)
			}
		})
	}
}

// The fast path answers a configuration's validation only when the
// framework would report nothing; everything it is not sure of, the
// framework answers, naming what is wrong.
func TestFastValidationAgreesWithTheFramework(t *testing.T) {
	ctx := context.Background()
	s := serve(t, fastpath.Check)
	examples := s.examples()
	attr := func(typeName string, path ...string) cty.Type {
		ty := s.types[typeName]
		for _, name := range path {
			ty = ty.AttributeType(name)
			if ty.IsListType() {
				ty = ty.ElementType()
			}
		}
		return ty
	}
	with := func(typeName string, set map[string]cty.Value) cty.Value {
		attrs := examples[typeName].AsValueMap()
		for k, v := range set {
			attrs[k] = v
		}
		return cty.ObjectVal(attrs)
	}
	container := func(set map[string]cty.Value) cty.Value {
		if _, ok := set["image"]; !ok {
			set["image"] = cty.StringVal("ollama/ollama:0.24.0")
		}
		return configOf(attr("gpuslice_workload", "container"), set)
	}
	workload := func(set map[string]cty.Value) cty.Value { return with("gpuslice_workload", set) }
	cases := []struct {
		name, typeName string
		config         cty.Value
		// error is part of the framework's error, empty when valid.
		error string
	}{
		{"minimal", "gpuslice_workload", workload(nil), ""},
		{"every block", "gpuslice_workload", workload(map[string]cty.Value{
			"kind": cty.StringVal("statefulset"), "wait_for": cty.StringVal("scheduled"),
			"container": container(map[string]cty.Value{"image_pull_policy": cty.StringVal("IfNotPresent"),
				"port": cty.ListVal([]cty.Value{configOf(attr("gpuslice_workload", "container", "port"), map[string]cty.Value{"container_port": cty.NumberIntVal(11434)})})}),
			"expose":       configOf(attr("gpuslice_workload", "expose"), map[string]cty.Value{"port": cty.NumberIntVal(80)}),
			"model_volume": configOf(attr("gpuslice_workload", "model_volume"), map[string]cty.Value{"size": cty.StringVal("20Gi"), "mount_path": cty.StringVal("/models")}),
			"timeouts":     configOf(attr("gpuslice_workload", "timeouts"), map[string]cty.Value{"create": cty.StringVal("5m")}),
		}), ""},
		{"unknown values", "gpuslice_workload", workload(map[string]cty.Value{"kind": cty.UnknownVal(cty.String), "expose": cty.UnknownVal(attr("gpuslice_workload", "expose"))}), ""},
		{"one_of", "gpuslice_workload", workload(map[string]cty.Value{"kind": cty.StringVal("cronjob")}), "value must be one of"},
		{"one_of in a block", "gpuslice_workload", workload(map[string]cty.Value{"container": container(map[string]cty.Value{"image_pull_policy": cty.StringVal("Sometimes")})}), "value must be one of"},
		{"read-only attribute", "gpuslice_workload", workload(map[string]cty.Value{"phase": cty.StringVal("Running")}), "Read-Only"},
		{"required block", "gpuslice_workload", workload(map[string]cty.Value{"container": cty.NullVal(attr("gpuslice_workload", "container"))}), "must have a configuration value"},
		{"partly set block", "gpuslice_workload", workload(map[string]cty.Value{"expose": configOf(attr("gpuslice_workload", "expose"), map[string]cty.Value{"target_port": cty.NumberIntVal(8080)})}), "must be specified"},
		{"required in a list block", "gpuslice_workload", workload(map[string]cty.Value{"container": container(map[string]cty.Value{
			"port": cty.ListVal([]cty.Value{configOf(attr("gpuslice_workload", "container", "port"), map[string]cty.Value{"name": cty.StringVal("http")})})})}), "Missing Configuration for Required Attribute"},
		{"timeout", "gpuslice_workload", workload(map[string]cty.Value{"timeouts": configOf(attr("gpuslice_workload", "timeouts"), map[string]cty.Value{"create": cty.StringVal("five minutes")})}), "Time Duration"},
		{"package", "gpuslice_package", examples["gpuslice_package"], ""},
		{"package without fraction", "gpuslice_package", with("gpuslice_package", map[string]cty.Value{"fraction": cty.NullVal(cty.Number), "memory": cty.StringVal("6Gi")}), ""},
		{"package without a model", "gpuslice_package", with("gpuslice_package", map[string]cty.Value{"gpu_model": cty.NullVal(cty.String)}), "Missing Configuration for Required Attribute"},
		{"package sharing one_of", "gpuslice_package", with("gpuslice_package", map[string]cty.Value{"sharing": cty.StringVal("mps")}), "value must be one of"},
		{"quota", "gpuslice_quota", examples["gpuslice_quota"], ""},
		{"quota without slices", "gpuslice_quota", with("gpuslice_quota", map[string]cty.Value{"slices": cty.NullVal(cty.Map(cty.Number))}), "Missing Configuration for Required Attribute"},
		{"platform", "gpuslice_platform", examples["gpuslice_platform"], ""},
		{"platform node plugin without image", "gpuslice_platform", with("gpuslice_platform", map[string]cty.Value{
			"node_plugin": configOf(attr("gpuslice_platform", "node_plugin"), map[string]cty.Value{"driver_root": cty.StringVal("/")})}), "must be specified"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := s.p.fast.Validate.Load()
			resp, err := s.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: c.typeName, Config: dynamic(t, c.config)})
			if err != nil {
				t.Fatal(err)
			}
			fast := s.p.fast.Validate.Load() > before
			got := describe(resp.Diagnostics)
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

// A state saved by this schema version is read on the fast path, the
// attributes it lacks null; one with an attribute the schema no longer has
// is the framework's, which drops it, and so is one of another version.
func TestFastUpgradeAgreesWithTheFramework(t *testing.T) {
	ctx := context.Background()
	s := serve(t, fastpath.Check)
	ty := s.types["gpuslice_workload"]
	cases := []struct {
		name, state string
		version     int64
		fast        bool
		error       string
	}{
		{"current", `{"id":"team-a/llm","namespace":"team-a","name":"llm","package":"v100-8gi","kind":"deployment","container":{"image":"ollama/ollama:0.24.0","port":[{"container_port":11434,"name":"http","protocol":"TCP"}]},"timeouts":null}`, 0, true, ""},
		{"attributes missing", `{"id":"team-a/llm","namespace":"team-a","name":"llm"}`, 0, true, ""},
		{"attribute removed since", `{"id":"team-a/llm","namespace":"team-a","name":"llm","gone":"x"}`, 0, false, ""},
		{"another version", `{"id":"team-a/llm","namespace":"team-a","name":"llm"}`, 1, false, "Unable to Upgrade Resource State"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := s.p.fast.Upgrade.Load()
			resp, err := s.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{
				TypeName: "gpuslice_workload", Version: c.version, RawState: &tfprotov6.RawState{JSON: []byte(c.state)}})
			if err != nil {
				t.Fatal(err)
			}
			if fast := s.p.fast.Upgrade.Load() > before; fast != c.fast {
				t.Errorf("served on the fast path: %v, want %v", fast, c.fast)
			}
			if got := describe(resp.Diagnostics); c.error == "" && len(resp.Diagnostics) > 0 || !strings.Contains(got, c.error) {
				t.Fatalf("diagnostics %s, want %q", got, c.error)
			}
			if c.error != "" {
				return
			}
			v := undynamic(t, resp.UpgradedState, ty)
			if v.GetAttr("id").AsString() != "team-a/llm" || v.GetAttr("container").IsNull() != (c.name != "current") {
				t.Errorf("upgraded state %#v", v)
			}
		})
	}
}
