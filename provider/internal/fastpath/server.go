package fastpath

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// Resource is the provider's own work on one resource, the same its
// framework resource does in Read and ModifyPlan; each wraps it in Once.
type Resource interface {
	// ReadValue is Read on the state's value (list blocks null where
	// empty, as the framework hands them over); false when the resource
	// cannot be read now (the framework's Read then keeps the state).
	ReadValue(ctx context.Context, state cty.Value) (ReadResult, bool)
	// PlanValue is ModifyPlan of a plan equal to the state, with the
	// configuration it was planned from.
	PlanValue(ctx context.Context, planned, config cty.Value) PlanResult
}

// ReadResult is what Read found.
type ReadResult struct {
	// State is the new state (list blocks null where empty), cty.NilVal
	// when the resource is gone.
	State cty.Value
	// Identity is the identity attributes Read sets.
	Identity    map[string]string
	Diagnostics diag.Diagnostics
}

// PlanResult is what ModifyPlan sets on the plan.
type PlanResult struct {
	// Set are the top-level attributes set on the plan.
	Set         map[string]cty.Value
	Diagnostics diag.Diagnostics
}

// Resources returns the Resource of a type, with this run's provider
// configuration; false before the provider is configured.
type Resources func(typeName string) (Resource, bool)

// Counts counts the requests the fast path served, by kind.
type Counts struct{ Validate, Upgrade, Read, Plan atomic.Int64 }

// Mode is how the provider serves requests.
type Mode int

const (
	// On serves what the fast path understands on it (the default).
	On Mode = iota
	// Off serves every request through the framework.
	Off
	// Check serves each fast request through the framework too, and fails
	// the request where the two answers differ.
	Check
)

// EnvVar names the environment variable that sets the Mode.
const EnvVar = "GPUSLICE_PROVIDER_FAST_PATH"

// ModeFromEnv reads the Mode from EnvVar: on (or unset), off or check.
func ModeFromEnv() (Mode, error) {
	switch v := os.Getenv(EnvVar); strings.ToLower(v) {
	case "", "on":
		return On, nil
	case "off":
		return Off, nil
	case "check":
		return Check, nil
	default:
		return On, fmt.Errorf("%s=%q: set it to on, off or check (or leave it unset)", EnvVar, v)
	}
}

// Server is the framework's protocol server with the fast path in front.
type Server struct {
	tfprotov6.ProviderServer
	types map[string]*resourceType
	// frameworkOnly says why each resource type the fast path does not
	// serve is the framework's alone.
	frameworkOnly map[string]string
	resources     Resources
	check         bool
	counts        *Counts
}

// New puts the fast path in front of framework, the framework's server of
// p, for the resource types of p it understands; resources gives it the
// provider's own work. In mode Check every fast answer is compared with
// the framework's; served, when not nil, counts the fast answers.
func New(framework tfprotov6.ProviderServer, p fwprovider.Provider, resources Resources, mode Mode, served *Counts) *Server {
	ctx := context.Background()
	if served == nil {
		served = &Counts{}
	}
	s := &Server{ProviderServer: framework, types: map[string]*resourceType{}, frameworkOnly: map[string]string{},
		resources: resources, check: mode == Check, counts: served}
	var meta fwprovider.MetadataResponse
	p.Metadata(ctx, fwprovider.MetadataRequest{}, &meta)
	_, hasMeta := p.(fwprovider.ProviderWithMetaSchema)
	for _, newResource := range p.Resources(ctx) {
		r := newResource()
		var md resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: meta.TypeName}, &md)
		name := md.TypeName
		if hasMeta {
			s.frameworkOnly[name] = "the provider has a meta schema"
			continue
		}
		t, reason := understand(ctx, name, r, md.ResourceBehavior)
		if t == nil {
			s.frameworkOnly[name] = reason
			continue
		}
		s.types[name] = t
	}
	return s
}

// FrameworkOnly says, for each resource type the fast path leaves to the
// framework, why.
func (s *Server) FrameworkOnly() map[string]string {
	out := map[string]string{}
	for k, v := range s.frameworkOnly {
		out[k] = v
	}
	return out
}

func (s *Server) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	t := s.types[req.TypeName]
	if t == nil {
		return s.ProviderServer.ValidateResourceConfig(ctx, req)
	}
	cfg, ok := decode(req.Config, t.value)
	if !ok || !cfg.IsKnown() || cfg.IsNull() || !t.block.certainlyValid(ctx, cfg) {
		return s.ProviderServer.ValidateResourceConfig(ctx, req)
	}
	s.counts.Validate.Add(1)
	resp := &tfprotov6.ValidateResourceConfigResponse{}
	if s.check {
		slow, err := s.ProviderServer.ValidateResourceConfig(ctx, req)
		s.compare(ctx, &resp.Diagnostics, "validate "+req.TypeName, err, func() []string { return validateDiff(resp, slow) })
	}
	return resp, nil
}

// UpgradeResourceState reads a state saved by the schema's current
// version: the framework's pass-through, without attributes the schema no
// longer has (those are the framework's, which drops them).
func (s *Server) UpgradeResourceState(ctx context.Context, req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, error) {
	t := s.types[req.TypeName]
	if t == nil || req.Version != t.version || req.RawState == nil || len(req.RawState.JSON) == 0 || len(req.RawState.Flatmap) > 0 {
		return s.ProviderServer.UpgradeResourceState(ctx, req)
	}
	v, err := ctyjson.Unmarshal(req.RawState.JSON, t.value)
	if err != nil {
		return s.ProviderServer.UpgradeResourceState(ctx, req)
	}
	dv, err := encode(t.block.reify(v), t.value)
	if err != nil {
		return s.ProviderServer.UpgradeResourceState(ctx, req)
	}
	s.counts.Upgrade.Add(1)
	resp := &tfprotov6.UpgradeResourceStateResponse{UpgradedState: dv}
	if s.check {
		slow, err := s.ProviderServer.UpgradeResourceState(ctx, req)
		s.compare(ctx, &resp.Diagnostics, "upgrade "+req.TypeName, err, func() []string { return upgradeDiff(t, resp, slow) })
	}
	return resp, nil
}

func (s *Server) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	ctx = withRecord(ctx)
	resp, ok := s.fastRead(ctx, req)
	if !ok {
		return s.ProviderServer.ReadResource(ctx, req)
	}
	s.counts.Read.Add(1)
	if s.check {
		slow, err := s.ProviderServer.ReadResource(ctx, req)
		s.compare(ctx, &resp.Diagnostics, "read "+req.TypeName, err, func() []string { return readDiff(s.types[req.TypeName], resp, slow) })
	}
	return resp, nil
}

func (s *Server) fastRead(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, bool) {
	t := s.types[req.TypeName]
	if t == nil || len(req.Private) > 0 {
		return nil, false
	}
	current, ok := decode(req.CurrentState, t.value)
	if !ok || current.IsNull() || !current.IsWhollyKnown() {
		return nil, false
	}
	identity := cty.NullVal(t.identity)
	if req.CurrentIdentity != nil {
		if identity, ok = decode(req.CurrentIdentity.IdentityData, t.identity); !ok {
			return nil, false
		}
	}
	r, ok := s.resources(req.TypeName)
	if !ok {
		return nil, false
	}
	res, ok := r.ReadValue(ctx, t.block.nullify(current))
	if !ok {
		return nil, false
	}
	// On an error the framework answers the state and identity it was
	// given; otherwise, gone or not, the identity Read gives (Respond).
	state := current
	if !res.Diagnostics.HasError() {
		switch {
		case res.State == cty.NilVal:
			state = cty.NullVal(t.value)
		case !res.State.Type().Equals(t.value):
			return nil, false
		default:
			state = t.block.reify(res.State)
		}
		next, ok := t.identityWith(identity, res.Identity)
		if !ok || fullyNull(next) || (!fullyNull(identity) && !identity.RawEquals(next)) {
			return nil, false // the framework reports the identity missing or changed
		}
		identity = next
	}
	diags, ok := protoDiagnostics(res.Diagnostics)
	if !ok {
		return nil, false
	}
	stateDV, err := encode(state, t.value)
	if err != nil {
		return nil, false
	}
	identityDV, err := encode(identity, t.identity)
	if err != nil {
		return nil, false
	}
	return &tfprotov6.ReadResourceResponse{NewState: stateDV, NewIdentity: &tfprotov6.ResourceIdentityData{IdentityData: identityDV}, Diagnostics: diags}, true
}

func (s *Server) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	ctx = withRecord(ctx)
	resp, ok := s.fastPlan(ctx, req)
	if !ok {
		return s.ProviderServer.PlanResourceChange(ctx, req)
	}
	s.counts.Plan.Add(1)
	if s.check {
		slow, err := s.ProviderServer.PlanResourceChange(ctx, req)
		s.compare(ctx, &resp.Diagnostics, "plan "+req.TypeName, err, func() []string { return planDiff(s.types[req.TypeName], resp, slow) })
	}
	return resp, nil
}

// fastPlan plans a resource whose configuration, defaults filled in,
// matches its state: nothing for the framework's schema plan modifiers to
// do (no computed value to mark unknown, no replacement), so the plan is
// the state with what ModifyPlan sets on it.
func (s *Server) fastPlan(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, bool) {
	t := s.types[req.TypeName]
	if t == nil || len(req.PriorPrivate) > 0 {
		return nil, false
	}
	cfg, ok := decode(req.Config, t.value)
	if !ok || cfg.IsNull() || !cfg.IsWhollyKnown() {
		return nil, false
	}
	proposed, ok := decode(req.ProposedNewState, t.value)
	if !ok || proposed.IsNull() {
		return nil, false
	}
	prior, ok := decode(req.PriorState, t.value)
	if !ok || prior.IsNull() {
		return nil, false
	}
	planned, _, ok := t.block.withDefaults(proposed, cfg)
	if !ok || !planned.RawEquals(prior) {
		return nil, false
	}
	identity := cty.NullVal(t.identity)
	if req.PriorIdentity != nil {
		if identity, ok = decode(req.PriorIdentity.IdentityData, t.identity); !ok {
			return nil, false
		}
	}
	r, ok := s.resources(req.TypeName)
	if !ok {
		return nil, false
	}
	res := r.PlanValue(ctx, t.block.nullify(planned), cfg)
	if len(res.Set) > 0 {
		attrs := planned.AsValueMap()
		for name, v := range res.Set {
			if !t.value.HasAttribute(name) {
				return nil, false
			}
			cv, err := convert.Convert(v, t.value.AttributeType(name))
			if err != nil {
				return nil, false
			}
			attrs[name] = cv
		}
		planned = cty.ObjectVal(attrs)
	}
	diags, ok := protoDiagnostics(res.Diagnostics)
	if !ok {
		return nil, false
	}
	plannedDV, err := encode(planned, t.value)
	if err != nil {
		return nil, false
	}
	identityDV, err := encode(identity, t.identity)
	if err != nil {
		return nil, false
	}
	return &tfprotov6.PlanResourceChangeResponse{PlannedState: plannedDV, PlannedIdentity: &tfprotov6.ResourceIdentityData{IdentityData: identityDV}, Diagnostics: diags}, true
}

// identityWith is identity (null or not) with the attributes set; false
// when one is not the identity's.
func (t *resourceType) identityWith(identity cty.Value, set map[string]string) (cty.Value, bool) {
	attrs := map[string]cty.Value{}
	for name, ty := range t.identity.AttributeTypes() {
		attrs[name] = cty.NullVal(ty)
		if !identity.IsNull() {
			attrs[name] = identity.GetAttr(name)
		}
	}
	for name, v := range set {
		if !t.identity.HasAttribute(name) {
			return cty.NilVal, false
		}
		attrs[name] = cty.StringVal(v)
	}
	return cty.ObjectVal(attrs), true
}

// fullyNull is the framework's IsFullyNull: null, or every attribute null.
func fullyNull(v cty.Value) bool {
	if v.IsNull() {
		return true
	}
	for it := v.ElementIterator(); it.Next(); {
		if _, a := it.Element(); !a.IsNull() {
			return false
		}
	}
	return true
}
