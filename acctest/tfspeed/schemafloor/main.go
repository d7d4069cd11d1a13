// Command schemafloor is a provider that serves gpuslice's schema and does
// nothing else: it validates nothing, reads back the state it is given and
// plans what OpenTofu proposes. A no-change `tofu plan` through it is the
// least any provider with gpuslice's schema can cost, OpenTofu's own work
// on these resources (its walks, its encoding of each request and
// response, its state) and the plugin protocol, so the benchmark can say
// how much of a plan is the provider's own. It plans only: its state comes
// from an apply made with the real provider.
package main

import (
	"context"
	"errors"
	"log"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/gpuslice/gpuslice/provider"
)

func main() {
	gpuslice, err := provider.NewServer(provider.New("schemafloor")())()
	if err != nil {
		log.Fatal(err)
	}
	if err := tf6server.Serve(provider.Address, func() tfprotov6.ProviderServer { return floor{gpuslice} }); err != nil {
		log.Fatal(err)
	}
}

// floor answers the requests of a plan itself; the schema requests (and
// any other) go to the real provider.
type floor struct{ tfprotov6.ProviderServer }

func (floor) ValidateProviderConfig(_ context.Context, req *tfprotov6.ValidateProviderConfigRequest) (*tfprotov6.ValidateProviderConfigResponse, error) {
	return &tfprotov6.ValidateProviderConfigResponse{PreparedConfig: req.Config}, nil
}

func (floor) ConfigureProvider(context.Context, *tfprotov6.ConfigureProviderRequest) (*tfprotov6.ConfigureProviderResponse, error) {
	return &tfprotov6.ConfigureProviderResponse{}, nil
}

func (floor) ValidateResourceConfig(context.Context, *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	return &tfprotov6.ValidateResourceConfigResponse{}, nil
}

// UpgradeResourceState answers the stored JSON as it is: the state was
// written by this schema's version.
func (floor) UpgradeResourceState(_ context.Context, req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, error) {
	if req.RawState == nil || req.RawState.JSON == nil {
		return nil, errors.New("schemafloor: a state without JSON (flatmap) is not from this schema")
	}
	return &tfprotov6.UpgradeResourceStateResponse{UpgradedState: &tfprotov6.DynamicValue{JSON: req.RawState.JSON}}, nil
}

func (floor) ReadResource(_ context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	return &tfprotov6.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private, NewIdentity: req.CurrentIdentity}, nil
}

func (floor) PlanResourceChange(_ context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	return &tfprotov6.PlanResourceChangeResponse{PlannedState: req.ProposedNewState, PlannedPrivate: req.PriorPrivate, PlannedIdentity: req.PriorIdentity}, nil
}

func (floor) ApplyResourceChange(context.Context, *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	return nil, errors.New("schemafloor plans only: apply with the gpuslice provider")
}
