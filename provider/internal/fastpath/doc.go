// Package fastpath answers, in front of terraform-plugin-framework's
// protocol server, the requests a no-change `terraform plan` of gpuslice
// resources is made of, on the wire values (cty from MessagePack) instead
// of the framework's.
//
// Why: the framework's schema walks cost more than the provider's own
// work. In a no-change `tofu plan` of 200 workloads, validating, reading
// and planning through the framework took more than half of the provider's
// CPU; the speed table of docs/guides/benchmarks.md is measured with this package in front.
//
// What it serves, for a resource type it understands (below):
//
//   - ValidateResourceConfig, when the framework's schema validation would
//     certainly find nothing: required attributes set, read-only ones not,
//     every validator passed (valid.go). Anything it is not sure of goes to
//     the framework, which names what is wrong.
//   - UpgradeResourceState of a state saved by the schema's current
//     version (Schema.Version): the framework's pass-through.
//   - ReadResource without private data: the provider's Read
//     (Resource.ReadValue), the new state and identity written as the
//     framework writes them.
//   - PlanResourceChange of a resource whose configuration, defaults filled
//     in, equals its state: no computed value to mark unknown, no plan
//     modifier with anything to do, so the plan is the state with what the
//     provider's ModifyPlan (Resource.PlanValue) sets on it.
//
// Everything else is the framework's, answered as if this package were
// not there: data sources, the provider's own requests, imports, applies,
// a plan with a change, values sent as JSON, private data, identities that
// change or are missing, diagnostics it could not write the framework's
// way.
//
// What it understands is decided at start-up (New, schema.go), from each
// resource's framework schema, every attribute and nested block, field by
// field: string, number, bool, list and map attributes and single and
// list blocks; the validators it runs or redoes (stringvalidator.OneOf,
// the timeouts block's durations, objectvalidator.IsRequired,
// tfschema.AlsoRequires); the plan modifiers that do nothing on an
// unchanged plan (RequiresReplace, UseStateForUnknown); static defaults;
// the timeouts block's custom type. Any other validator, plan modifier,
// default or custom type, a deprecation, a sensitive or write-only
// attribute, any schema field it does not know, resource-level config
// validators, resource behaviors or a provider meta schema, and that
// resource is the framework's alone (Server.FrameworkOnly says why).
//
// What it redoes of the framework's internals is held equal to them by
// tests on the gpuslice schemas: NullifyCollectionBlocks and
// ReifyNullCollectionBlocks (nullify and reify), schema validation and
// defaults (check mode).
//
// Check mode (Mode Check; the provider's acceptance tests run in it)
// serves each fast request through the framework too and fails the
// request at the first difference, comparing every field of the two
// answers: values, identities, diagnostics, private data, deferrals,
// RequiresReplace paths. The provider's own work is done once per request
// (Once), so both answers come from one reading of the cluster and there
// is nothing to retry. GPUSLICE_PROVIDER_FAST_PATH (EnvVar) sets the mode:
// on (the default), off or check.
package fastpath
