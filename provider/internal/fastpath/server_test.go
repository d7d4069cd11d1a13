package fastpath_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/provider/internal/fastpath"
)

// Reads of every resource type, in check mode: what the fast path
// answers is the framework's answer, field for field, and what it cannot
// answer the framework's way (an identity missing or changing, private
// data) it leaves to the framework. The provider is asked once per
// request either way.
func TestFastReadAgreesWithTheFramework(t *testing.T) {
	ctx := context.Background()
	s, sc, counts := scripted(t, fastpath.Check, nil)
	for _, typeName := range gpusliceTypes(t) {
		ty, idType, _ := s.Types(typeName)
		state := blankState(ty, idType)
		identity := identityOf(state, idType)
		drifted := func(v cty.Value) cty.Value {
			attrs := v.AsValueMap()
			for name, a := range attrs {
				if a.Type() == cty.String && a.IsNull() {
					attrs[name] = cty.StringVal("drifted")
				}
			}
			return cty.ObjectVal(attrs)
		}
		idAttrs := map[string]string{}
		for _, name := range sortedAttributes(idType) {
			idAttrs[name] = state.GetAttr(name).AsString()
		}
		otherID := map[string]string{}
		for name := range idAttrs {
			otherID[name] = "other"
		}
		cases := []struct {
			name     string
			read     func(cty.Value) fastpath.ReadResult
			identity cty.Value // cty.NilVal: none sent
			private  []byte
			want     cty.Value // the new state, NilVal for null
			fast     bool
			// failed is the summary of the error the read fails with, ""
			// when it succeeds: then with the state's identity.
			failed string
		}{
			{"unchanged", func(v cty.Value) fastpath.ReadResult { return fastpath.ReadResult{State: v, Identity: idAttrs} }, identity, nil, state, true, ""},
			{"drifted", func(v cty.Value) fastpath.ReadResult {
				return fastpath.ReadResult{State: drifted(v), Identity: idAttrs}
			}, identity, nil, drifted(state), true, ""},
			{"first identity", func(v cty.Value) fastpath.ReadResult { return fastpath.ReadResult{State: v, Identity: idAttrs} }, cty.NilVal, nil, state, true, ""},
			{"gone", func(cty.Value) fastpath.ReadResult { return fastpath.ReadResult{State: cty.NilVal, Identity: idAttrs} }, identity, nil, cty.NilVal, true, ""},
			{"warned", func(v cty.Value) fastpath.ReadResult {
				var ds diag.Diagnostics
				ds.AddAttributeWarning(path.Root("id"), "look", "at this")
				ds.AddWarning("and", "this")
				return fastpath.ReadResult{State: v, Identity: idAttrs, Diagnostics: ds}
			}, identity, nil, state, true, ""},
			{"failed", func(v cty.Value) fastpath.ReadResult {
				var ds diag.Diagnostics
				ds.AddAttributeError(path.Root("id"), "cannot read", "the cluster said no")
				return fastpath.ReadResult{Diagnostics: ds}
			}, identity, nil, state, true, "cannot read"},
			// Deleted out of band, from a state without identity (written
			// before identities, or by a client that keeps none): removed,
			// with the identity Read gives, as the provider's Read gives it.
			{"gone without identity", func(cty.Value) fastpath.ReadResult {
				return fastpath.ReadResult{State: cty.NilVal, Identity: idAttrs}
			}, cty.NilVal, nil, cty.NilVal, true, ""},
			// A Read that gave no identity there would fail every plan: the
			// framework's error, which the fast path leaves to it.
			{"gone, no identity anywhere", func(cty.Value) fastpath.ReadResult { return fastpath.ReadResult{State: cty.NilVal} }, cty.NilVal, nil, cty.NilVal, false, "Missing Resource Identity After Read"},
			{"identity changed", func(v cty.Value) fastpath.ReadResult { return fastpath.ReadResult{State: v, Identity: otherID} }, identity, nil, state, false, "Unexpected Identity Change"},
			{"private data", func(v cty.Value) fastpath.ReadResult { return fastpath.ReadResult{State: v, Identity: idAttrs} }, identity, []byte(`{}`), state, false, ""},
		}
		for _, c := range cases {
			t.Run(typeName+"/"+c.name, func(t *testing.T) {
				sc.read = c.read
				req := &tfprotov6.ReadResourceRequest{TypeName: typeName, CurrentState: dynamic(t, state), Private: c.private}
				if c.identity != cty.NilVal {
					req.CurrentIdentity = &tfprotov6.ResourceIdentityData{IdentityData: dynamic(t, c.identity)}
				}
				reads, asked := counts.Read.Load(), sc.asked()
				resp, err := s.ReadResource(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if d := differs(resp.Diagnostics); d != "" {
					t.Fatalf("check mode found a difference: %s", d)
				}
				if got := errorSummaries(resp.Diagnostics); got != c.failed {
					t.Errorf("errors %q, want %q (diagnostics %s)", got, c.failed, describe(resp.Diagnostics))
				}
				if fast := counts.Read.Load() > reads; fast != c.fast {
					t.Errorf("served on the fast path: %v, want %v (diagnostics %s)", fast, c.fast, describe(resp.Diagnostics))
				}
				if n := sc.asked() - asked; n != 1 {
					t.Errorf("the provider was asked %d times, want once", n)
				}
				if c.failed != "" {
					return
				}
				got := undynamic(t, resp.NewState, ty)
				if c.want == cty.NilVal && !got.IsNull() || c.want != cty.NilVal && !got.RawEquals(c.want) {
					t.Errorf("new state %#v, want %#v", got, c.want)
				}
				if resp.NewIdentity == nil {
					t.Fatalf("no identity, want %#v", identity)
				}
				if got := undynamic(t, resp.NewIdentity.IdentityData, idType); !got.RawEquals(identity) {
					t.Errorf("identity %#v, want %#v", got, identity)
				}
			})
		}
	}
}

// No-change plans of every resource type, in check mode: the fast plan is
// the framework's, with what ModifyPlan sets on it and its diagnostics; a
// plan with a change is the framework's.
func TestFastPlanAgreesWithTheFramework(t *testing.T) {
	ctx := context.Background()
	s, sc, counts := scripted(t, fastpath.Check, nil)
	for _, typeName := range gpusliceTypes(t) {
		ty, idType, _ := s.Types(typeName)
		state, identity := plannedState(t, s, sc, typeName)
		var stringAttr string
		for _, name := range sortedAttributes(ty) {
			if ty.AttributeType(name) == cty.String && name != "id" && !idType.HasAttribute(name) {
				stringAttr = name
				break
			}
		}
		if stringAttr == "" {
			t.Fatalf("%s: no string attribute to set", typeName)
		}
		config := cty.ObjectVal(map[string]cty.Value{})
		{
			attrs := state.AsValueMap()
			attrs["id"] = cty.NullVal(cty.String)
			config = cty.ObjectVal(attrs)
		}
		changed := func() cty.Value {
			attrs := state.AsValueMap()
			attrs["id"] = cty.StringVal("changed")
			return cty.ObjectVal(attrs)
		}()
		cases := []struct {
			name     string
			plan     func(cty.Value) fastpath.PlanResult
			proposed cty.Value
			fast     bool
		}{
			{"nothing set", func(cty.Value) fastpath.PlanResult { return fastpath.PlanResult{} }, state, true},
			{"an attribute set", func(cty.Value) fastpath.PlanResult {
				return fastpath.PlanResult{Set: map[string]cty.Value{stringAttr: cty.StringVal("planned")}}
			}, state, true},
			{"unknown after apply", func(cty.Value) fastpath.PlanResult {
				var ds diag.Diagnostics
				ds.AddWarning("Objects changed outside Terraform", "apply restores them")
				return fastpath.PlanResult{Set: map[string]cty.Value{stringAttr: cty.UnknownVal(cty.String)}, Diagnostics: ds}
			}, state, true},
			{"refused", func(cty.Value) fastpath.PlanResult {
				var ds diag.Diagnostics
				ds.AddAttributeError(path.Root(stringAttr), "no", "not like this")
				return fastpath.PlanResult{Diagnostics: ds}
			}, state, true},
			{"a change", func(cty.Value) fastpath.PlanResult { return fastpath.PlanResult{} }, changed, false},
		}
		for _, c := range cases {
			t.Run(typeName+"/"+c.name, func(t *testing.T) {
				sc.plan = c.plan
				plans, asked := counts.Plan.Load(), sc.asked()
				resp, err := s.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: typeName,
					Config: dynamic(t, config), PriorState: dynamic(t, state), ProposedNewState: dynamic(t, c.proposed),
					PriorIdentity: &tfprotov6.ResourceIdentityData{IdentityData: dynamic(t, identity)}})
				if err != nil {
					t.Fatal(err)
				}
				if d := differs(resp.Diagnostics); d != "" {
					t.Fatalf("check mode found a difference: %s", d)
				}
				if fast := counts.Plan.Load() > plans; fast != c.fast {
					t.Errorf("served on the fast path: %v, want %v (diagnostics %s)", fast, c.fast, describe(resp.Diagnostics))
				}
				if n := sc.asked() - asked; n != 1 {
					t.Errorf("the provider was asked %d times, want once", n)
				}
				if c.fast {
					want := state
					for name, v := range c.plan(state).Set {
						attrs := want.AsValueMap()
						attrs[name] = v
						want = cty.ObjectVal(attrs)
					}
					if got := undynamic(t, resp.PlannedState, ty); !got.RawEquals(want) {
						t.Errorf("planned %#v, want %#v", got, want)
					}
				}
			})
		}
	}
}

// plannedState is the state the framework's plan to create a blank
// resource of typeName leaves once applied: defaults filled in, the id
// set, everything else computed null; and its identity.
func plannedState(t *testing.T, s *fastpath.Server, sc *script, typeName string) (cty.Value, cty.Value) {
	t.Helper()
	ty, idType, _ := s.Types(typeName)
	blank := blankState(ty, idType)
	config := func() cty.Value {
		attrs := blank.AsValueMap()
		attrs["id"] = cty.NullVal(cty.String)
		return cty.ObjectVal(attrs)
	}()
	sc.plan = nil
	resp, err := s.PlanResourceChange(context.Background(), &tfprotov6.PlanResourceChangeRequest{TypeName: typeName,
		Config: dynamic(t, config), PriorState: dynamic(t, cty.NullVal(ty)), ProposedNewState: dynamic(t, config)})
	if err != nil || len(resp.Diagnostics) > 0 {
		t.Fatalf("plan to create: %v %s", err, describe(resp.Diagnostics))
	}
	state, err := cty.Transform(undynamic(t, resp.PlannedState, ty), func(p cty.Path, v cty.Value) (cty.Value, error) {
		switch {
		case v.IsKnown():
			return v, nil
		case p.Equals(cty.GetAttrPath("id")):
			return blank.GetAttr("id"), nil
		}
		return cty.NullVal(v.Type()), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return state, identityOf(state, idType)
}

// replacing is the framework's server with its answers changed by edit:
// check mode must notice.
type replacing struct {
	tfprotov6.ProviderServer
	calls    int
	editRead func(*tfprotov6.ReadResourceResponse)
	editPlan func(*tfprotov6.PlanResourceChangeResponse)
}

func (r *replacing) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	r.calls++
	resp, err := r.ProviderServer.ReadResource(ctx, req)
	if err == nil && r.editRead != nil {
		r.editRead(resp)
	}
	return resp, err
}

func (r *replacing) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	r.calls++
	resp, err := r.ProviderServer.PlanResourceChange(ctx, req)
	if err == nil && r.editPlan != nil {
		r.editPlan(resp)
	}
	return resp, err
}

// Check mode fails the request at the first difference, asking the
// framework once: a deferral the framework's answer has and the fast one
// lacks, a path that requires replacement, the same number of such paths
// but another one.
func TestCheckModeFailsAtTheFirstDifference(t *testing.T) {
	ctx := context.Background()
	framework := &replacing{}
	s, sc, _ := scripted(t, fastpath.Check, func(fw tfprotov6.ProviderServer) tfprotov6.ProviderServer {
		framework.ProviderServer = fw
		return framework
	})
	typeName := "gpuslice_package"
	ty, idType, _ := s.Types(typeName)
	state, identity := plannedState(t, s, sc, typeName)
	sc.read = func(v cty.Value) fastpath.ReadResult {
		attrs := map[string]string{}
		for _, name := range sortedAttributes(idType) {
			attrs[name] = v.GetAttr(name).AsString()
		}
		return fastpath.ReadResult{State: v, Identity: attrs}
	}
	read := func() *tfprotov6.ReadResourceResponse {
		resp, err := s.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: typeName, CurrentState: dynamic(t, state),
			CurrentIdentity: &tfprotov6.ResourceIdentityData{IdentityData: dynamic(t, identity)}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	plan := func() *tfprotov6.PlanResourceChangeResponse {
		resp, err := s.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: typeName,
			Config: dynamic(t, state), PriorState: dynamic(t, state), ProposedNewState: dynamic(t, state),
			PriorIdentity: &tfprotov6.ResourceIdentityData{IdentityData: dynamic(t, identity)}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// (the id is computed: configuring it is not what Terraform does, but
	// the plan is the same.)
	if d := differs(plan().Diagnostics); d != "" {
		t.Fatalf("unedited plan: %s", d)
	}
	if d := differs(read().Diagnostics); d != "" {
		t.Fatalf("unedited read: %s", d)
	}
	name := tftypes.NewAttributePath().WithAttributeName("name")
	gpuModel := tftypes.NewAttributePath().WithAttributeName("gpu_model")
	cases := []struct {
		name  string
		do    func() []*tfprotov6.Diagnostic
		found string
	}{
		{"read deferred", func() []*tfprotov6.Diagnostic {
			framework.editRead = func(r *tfprotov6.ReadResourceResponse) {
				r.Deferred = &tfprotov6.Deferred{Reason: tfprotov6.DeferredReasonProviderConfigUnknown}
			}
			return read().Diagnostics
		}, "deferred: none, the framework's PROVIDER_CONFIG_UNKNOWN"},
		{"plan deferred", func() []*tfprotov6.Diagnostic {
			framework.editPlan = func(r *tfprotov6.PlanResourceChangeResponse) {
				r.Deferred = &tfprotov6.Deferred{Reason: tfprotov6.DeferredReasonAbsentPrereq}
			}
			return plan().Diagnostics
		}, "deferred: none, the framework's ABSENT_PREREQ"},
		{"replacement", func() []*tfprotov6.Diagnostic {
			framework.editPlan = func(r *tfprotov6.PlanResourceChangeResponse) { r.RequiresReplace = []*tftypes.AttributePath{name} }
			return plan().Diagnostics
		}, `requires replace: [], the framework's ["AttributeName(\"name\")"]`},
		{"another replacement", func() []*tfprotov6.Diagnostic {
			// Fast answers with no path; compare two framework answers of
			// one path each through the exported diff.
			_, _, _, planDiff := s.Diffs(typeName)
			d := planDiff(&tfprotov6.PlanResourceChangeResponse{RequiresReplace: []*tftypes.AttributePath{name}},
				&tfprotov6.PlanResourceChangeResponse{RequiresReplace: []*tftypes.AttributePath{gpuModel}})
			return []*tfprotov6.Diagnostic{{Summary: "fast path differs", Detail: strings.Join(d, "; ")}}
		}, `requires replace: ["AttributeName(\"name\")"], the framework's ["AttributeName(\"gpu_model\")"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			framework.editRead, framework.editPlan = nil, nil
			before := framework.calls
			d := differs(c.do())
			if !strings.Contains(d, c.found) {
				t.Errorf("difference %q, want one with %q", d, c.found)
			}
			if c.name != "another replacement" && framework.calls-before != 1 {
				t.Errorf("the framework was asked %d times, want once (no retries)", framework.calls-before)
			}
		})
	}
	_ = ty
}

// Once answers a request's second question about the same value from the
// first answer, and a question about another value afresh, noting the
// difference.
func TestOnce(t *testing.T) {
	ctx := fastpath.WithRecord(context.Background())
	calls := 0
	answer := func() string { calls++; return fmt.Sprint("answer ", calls) }
	if got := fastpath.Once(ctx, cty.StringVal("a"), answer); got != "answer 1" {
		t.Fatalf("first answer %q", got)
	}
	if got := fastpath.Once(ctx, cty.StringVal("a"), answer); got != "answer 1" || calls != 1 {
		t.Errorf("second question about a: %q after %d calls, want the first answer", got, calls)
	}
	if d := fastpath.RecordDiffers(ctx); d != "" {
		t.Errorf("difference %q after the same question", d)
	}
	if got := fastpath.Once(ctx, cty.StringVal("b"), answer); got != "answer 2" {
		t.Errorf("question about b: %q, want a fresh answer", got)
	}
	if d := fastpath.RecordDiffers(ctx); !strings.Contains(d, `cty.StringVal("b")`) {
		t.Errorf("difference %q, want it to name b", d)
	}
	plain := context.Background()
	fastpath.Once(plain, cty.StringVal("a"), answer)
	fastpath.Once(plain, cty.StringVal("a"), answer)
	if calls != 4 {
		t.Errorf("outside a request: %d calls, want each question answered", calls)
	}
}

// Check mode compares every field of each response: for each, two
// responses differing only there differ.
func TestDiffsCompareEveryField(t *testing.T) {
	s, _, _ := scripted(t, fastpath.Check, nil)
	typeName := "gpuslice_workload"
	ty, idType, _ := s.Types(typeName)
	validate, upgrade, read, plan := s.Diffs(typeName)
	state := blankState(ty, idType)
	others := map[reflect.Type][2]any{
		reflect.TypeOf(&tfprotov6.DynamicValue{}): {dynamic(t, state), dynamic(t, cty.NullVal(ty))},
		reflect.TypeOf(&tfprotov6.ResourceIdentityData{}): {
			&tfprotov6.ResourceIdentityData{IdentityData: dynamic(t, identityOf(state, idType))},
			&tfprotov6.ResourceIdentityData{IdentityData: dynamic(t, cty.NullVal(idType))}},
		reflect.TypeOf([]*tfprotov6.Diagnostic{}): {
			[]*tfprotov6.Diagnostic{{Severity: tfprotov6.DiagnosticSeverityWarning, Summary: "s", Detail: "d", Attribute: tftypes.NewAttributePath().WithAttributeName("name")}},
			[]*tfprotov6.Diagnostic{{Severity: tfprotov6.DiagnosticSeverityWarning, Summary: "s", Detail: "d", Attribute: tftypes.NewAttributePath().WithAttributeName("namespace")}}},
		reflect.TypeOf([]byte{}):              {[]byte(`{"a":1}`), []byte(`{"a":2}`)},
		reflect.TypeOf(&tfprotov6.Deferred{}): {&tfprotov6.Deferred{Reason: tfprotov6.DeferredReasonAbsentPrereq}, &tfprotov6.Deferred{Reason: tfprotov6.DeferredReasonResourceConfigUnknown}},
		reflect.TypeOf([]*tftypes.AttributePath{}): {
			[]*tftypes.AttributePath{tftypes.NewAttributePath().WithAttributeName("name")},
			[]*tftypes.AttributePath{tftypes.NewAttributePath().WithAttributeName("namespace")}},
		reflect.TypeOf(true): {true, false},
	}
	check := func(t *testing.T, respType reflect.Type, diff func(fast, slow any) []string) {
		for i := 0; i < respType.NumField(); i++ {
			f := respType.Field(i)
			pair, ok := others[f.Type]
			if !ok {
				t.Errorf("%s.%s: no values of type %s to compare", respType.Name(), f.Name, f.Type)
				continue
			}
			fast, slow := reflect.New(respType), reflect.New(respType)
			fast.Elem().Field(i).Set(reflect.ValueOf(pair[0]))
			slow.Elem().Field(i).Set(reflect.ValueOf(pair[1]))
			if d := diff(fast.Interface(), slow.Interface()); len(d) == 0 {
				t.Errorf("%s.%s: a difference there is not found", respType.Name(), f.Name)
			}
			if d := diff(fast.Interface(), fast.Interface()); len(d) != 0 {
				t.Errorf("%s.%s: the same response differs: %v", respType.Name(), f.Name, d)
			}
		}
	}
	check(t, reflect.TypeOf(tfprotov6.ValidateResourceConfigResponse{}), func(f, s any) []string {
		return validate(f.(*tfprotov6.ValidateResourceConfigResponse), s.(*tfprotov6.ValidateResourceConfigResponse))
	})
	check(t, reflect.TypeOf(tfprotov6.UpgradeResourceStateResponse{}), func(f, s any) []string {
		return upgrade(f.(*tfprotov6.UpgradeResourceStateResponse), s.(*tfprotov6.UpgradeResourceStateResponse))
	})
	check(t, reflect.TypeOf(tfprotov6.ReadResourceResponse{}), func(f, s any) []string {
		return read(f.(*tfprotov6.ReadResourceResponse), s.(*tfprotov6.ReadResourceResponse))
	})
	check(t, reflect.TypeOf(tfprotov6.PlanResourceChangeResponse{}), func(f, s any) []string {
		return plan(f.(*tfprotov6.PlanResourceChangeResponse), s.(*tfprotov6.PlanResourceChangeResponse))
	})
}
