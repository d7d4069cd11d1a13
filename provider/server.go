package provider

// The protocol server. terraform-plugin-framework serves every RPC, but its
// schema walks cost more than the provider's own work: in a no-change
// `tofu plan` of 200 workloads, validating, reading and planning through
// the framework took more than half of the provider's CPU. The
// requests such a plan is made of — a configuration to validate, a state
// to read back, a plan that matches the state — are served here on the
// wire values (cty from MessagePack) by the same code the framework
// resources run (readValue, planValues); everything else, and every
// request whose shape is not the plain case (a change to plan, an import,
// private data, JSON values, a configuration with something to report), is
// the framework's.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	engineschema "github.com/gpuslice/gpuslice/engine/schema"
)

// NewServer returns the protocol-6 server of p (a provider New made), as
// providerserver.NewProtocol6WithError does, with the fast path.
func NewServer(p fwprovider.Provider) func() (tfprotov6.ProviderServer, error) {
	return newServer(p, false)
}

// server is the framework's server with the fast path in front.
type server struct {
	tfprotov6.ProviderServer
	p     *gpusliceProvider
	types map[string]*wireType
	// check serves every fast request through the framework too and
	// reports, as an error on the request, where the two answers differ
	// (the acceptance tests run this way).
	check bool
}

func newServer(p fwprovider.Provider, check bool) func() (tfprotov6.ProviderServer, error) {
	framework := providerserver.NewProtocol6WithError(p)
	return func() (tfprotov6.ProviderServer, error) {
		inner, err := framework()
		gp, ok := p.(*gpusliceProvider)
		if err != nil || !ok {
			return inner, err
		}
		s := &server{ProviderServer: inner, p: gp, types: map[string]*wireType{}, check: check}
		for _, def := range engineschema.Resources() {
			w, err := newWireType(context.Background(), def)
			if err != nil {
				return nil, fmt.Errorf("gpuslice provider schema: %w", err)
			}
			s.types[def.Type] = w
		}
		return s, nil
	}
}

// resource is the resource a fast request is for, with this run's cluster
// data; nil when the provider is not configured yet.
func (s *server) resource(w *wireType) *gpusliceResource {
	data := s.p.currentData()
	if data == nil {
		return nil
	}
	return &gpusliceResource{def: w.def, data: data}
}

func (s *server) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	if w := s.types[req.TypeName]; w != nil {
		if cfg, ok := decode(req.Config, w.value); ok && certainlyValid(cfg, w.def.Block) && (!w.def.Waits || timeoutsValid(cfg.GetAttr("timeouts"))) {
			s.p.fast.validate.Add(1)
			resp := &tfprotov6.ValidateResourceConfigResponse{}
			if s.check {
				slow, err := s.ProviderServer.ValidateResourceConfig(ctx, req)
				if err != nil || len(slow.Diagnostics) > 0 {
					resp.Diagnostics = differs("validate "+req.TypeName, fmt.Sprintf("the framework reports %s (%v)", describeDiagnostics(slow.Diagnostics), err))
				}
			}
			return resp, nil
		}
	}
	return s.ProviderServer.ValidateResourceConfig(ctx, req)
}

func (s *server) UpgradeResourceState(ctx context.Context, req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, error) {
	resp, ok := s.fastUpgrade(req)
	if !ok {
		return s.ProviderServer.UpgradeResourceState(ctx, req)
	}
	s.p.fast.upgrade.Add(1)
	if s.check {
		slow, err := s.ProviderServer.UpgradeResourceState(ctx, req)
		diff := fmt.Sprint(err)
		if err == nil {
			diff = firstDiff(valueDiff("upgraded state", resp.UpgradedState, slow.UpgradedState, s.types[req.TypeName].value),
				diagnosticsDiff(resp.Diagnostics, slow.Diagnostics))
		}
		if diff != "" {
			resp.Diagnostics = differs("upgrade "+req.TypeName, diff)
		}
	}
	return resp, nil
}

// fastUpgrade reads a state saved by this schema version (every gpuslice
// schema is still version 0): the framework's passthrough, without
// attributes the schema no longer has (those are the framework's).
func (s *server) fastUpgrade(req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, bool) {
	w := s.types[req.TypeName]
	if w == nil || req.Version != 0 || req.RawState == nil || len(req.RawState.JSON) == 0 {
		return nil, false
	}
	v, err := ctyjson.Unmarshal(req.RawState.JSON, w.value)
	if err != nil {
		return nil, false
	}
	dv, err := encode(reifyBlocks(v, w.def.Block), w.value)
	if err != nil {
		return nil, false
	}
	return &tfprotov6.UpgradeResourceStateResponse{UpgradedState: dv}, true
}

func (s *server) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	resp, ok, err := checked(s.check, &s.p.fast.read,
		func() (*tfprotov6.ReadResourceResponse, bool) { return s.fastRead(ctx, req) },
		func() (*tfprotov6.ReadResourceResponse, error) { return s.ProviderServer.ReadResource(ctx, req) },
		s.types[req.TypeName].readDiff)
	if ok && err != nil {
		resp.Diagnostics = append(resp.Diagnostics, differs("read "+req.TypeName, err.Error())...)
		return resp, nil
	}
	return resp, err
}

// checked serves a request: fast answers it (false leaves it to the
// framework's slow), counted in count. In check mode the framework answers
// too, and a difference diff finds in three tries (the cluster may change
// between two answers: only a difference that stays is one) is returned
// as the error, with ok and the fast answer.
func checked[R any](check bool, count *atomic.Int64, fast func() (R, bool), slow func() (R, error), diff func(fast, slow R) string) (resp R, ok bool, err error) {
	for attempt := 1; ; attempt++ {
		resp, ok := fast()
		if !ok {
			resp, err := slow()
			return resp, false, err
		}
		count.Add(1)
		if !check {
			return resp, true, nil
		}
		other, err := slow()
		d := fmt.Sprint(err)
		if err == nil {
			d = diff(resp, other)
		}
		if d == "" {
			return resp, true, nil
		}
		if attempt == 3 {
			return resp, true, errors.New(d)
		}
	}
}

func (s *server) fastRead(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, bool) {
	w := s.types[req.TypeName]
	if w == nil || len(req.Private) > 0 {
		return nil, false
	}
	r := s.resource(w)
	if r == nil || r.data.engine == nil {
		return nil, false
	}
	current, ok := decode(req.CurrentState, w.value)
	if !ok || current.IsNull() {
		return nil, false
	}
	identity := cty.NullVal(w.identity)
	if req.CurrentIdentity != nil {
		if identity, ok = decode(req.CurrentIdentity.IdentityData, w.identity); !ok {
			return nil, false
		}
	}
	var diags diag.Diagnostics
	next, id := r.readValue(ctx, nullifyBlocks(current, w.def.Block), &diags)
	state := current
	switch {
	case diags.HasError():
	case next == cty.NilVal:
		state = cty.NullVal(w.value)
	default:
		state = reifyBlocks(next, w.def.Block)
		newIdentity := w.identityOf(id, identity)
		if !identity.IsNull() && !identity.RawEquals(newIdentity) {
			return nil, false // the framework reports the change
		}
		identity = newIdentity
	}
	stateDV, err := encode(state, w.value)
	if err != nil {
		return nil, false
	}
	identityDV, err := encode(identity, w.identity)
	if err != nil {
		return nil, false
	}
	return &tfprotov6.ReadResourceResponse{NewState: stateDV, NewIdentity: &tfprotov6.ResourceIdentityData{IdentityData: identityDV}, Diagnostics: protoDiagnostics(diags)}, true
}

func (s *server) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, ok, err := checked(s.check, &s.p.fast.plan,
		func() (*tfprotov6.PlanResourceChangeResponse, bool) { return s.fastPlan(ctx, req) },
		func() (*tfprotov6.PlanResourceChangeResponse, error) {
			return s.ProviderServer.PlanResourceChange(ctx, req)
		},
		s.types[req.TypeName].planDiff)
	if ok && err != nil {
		resp.Diagnostics = append(resp.Diagnostics, differs("plan "+req.TypeName, err.Error())...)
		return resp, nil
	}
	return resp, err
}

// fastPlan plans a resource whose configuration, defaults filled in,
// matches its state: nothing for the framework's schema plan modifiers to
// do (no computed value to mark unknown, no replacement), so the plan is
// the state with what the engine plans set on it.
func (s *server) fastPlan(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, bool) {
	w := s.types[req.TypeName]
	if w == nil || len(req.PriorPrivate) > 0 {
		return nil, false
	}
	r := s.resource(w)
	if r == nil {
		return nil, false
	}
	cfg, ok := decode(req.Config, w.value)
	if !ok || !cfg.IsWhollyKnown() || cfg.IsNull() {
		return nil, false
	}
	proposed, ok := decode(req.ProposedNewState, w.value)
	if !ok || proposed.IsNull() {
		return nil, false
	}
	prior, ok := decode(req.PriorState, w.value)
	if !ok || prior.IsNull() {
		return nil, false
	}
	planned, _, ok := withDefaults(proposed, cfg, w.def.Block)
	if !ok || !planned.RawEquals(prior) {
		return nil, false
	}
	identity := cty.NullVal(w.identity)
	if req.PriorIdentity != nil {
		if identity, ok = decode(req.PriorIdentity.IdentityData, w.identity); !ok {
			return nil, false
		}
	}
	var diags diag.Diagnostics
	nullified := nullifyBlocks(planned, w.def.Block)
	set := r.planValues(ctx, nullified, func() (cty.Value, bool) { return nullified, true }, &diags)
	if len(set) > 0 {
		attrs := planned.AsValueMap()
		for name, v := range set {
			cv, err := convert.Convert(v, w.value.AttributeType(name))
			if err != nil {
				return nil, false
			}
			attrs[name] = cv
		}
		planned = cty.ObjectVal(attrs)
	}
	plannedDV, err := encode(planned, w.value)
	if err != nil {
		return nil, false
	}
	identityDV, err := encode(identity, w.identity)
	if err != nil {
		return nil, false
	}
	return &tfprotov6.PlanResourceChangeResponse{PlannedState: plannedDV, PlannedIdentity: &tfprotov6.ResourceIdentityData{IdentityData: identityDV}, Diagnostics: protoDiagnostics(diags)}, true
}

// identityOf is the identity of the resource whose import ID is id
// (setIdentity's), starting from current.
func (w *wireType) identityOf(id string, current cty.Value) cty.Value {
	attrs := map[string]cty.Value{}
	for name := range w.identity.AttributeTypes() {
		attrs[name] = cty.NullVal(cty.String)
		if !current.IsNull() {
			attrs[name] = current.GetAttr(name)
		}
	}
	parts := strings.SplitN(id, "/", len(w.def.Identity))
	for i, name := range w.def.Identity {
		if i < len(parts) {
			attrs[name] = cty.StringVal(parts[i])
		}
	}
	return cty.ObjectVal(attrs)
}

func differs(what, diff string) []*tfprotov6.Diagnostic {
	return []*tfprotov6.Diagnostic{{Severity: tfprotov6.DiagnosticSeverityError,
		Summary: "gpuslice fast path differs from the framework",
		Detail:  what + ": " + diff + "\n\nThis is a bug in the gpuslice provider."}}
}
