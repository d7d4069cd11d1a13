package render

import (
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Names of the ValidatingAdmissionPolicies gpuslice_platform installs. Each
// binding has the name of its policy.
//
// The platform is one Terraform resource and does not know the packages or
// quotas, so the policies are static and bound to every namespace carrying
// the tenant label. What differs per namespace — which packages it may
// claim — is read at admission time from the namespace's own gpuslice
// ResourceQuota (the claim-grants binding's paramRef): the grant follows the
// quota the moment it changes, with no second object to keep in step, and
// tenants cannot edit it (RBAC gives them read access only).
const (
	PolicyRawGPU          = "gpuslice-no-raw-gpu"
	PolicySliceIsolation  = "gpuslice-slice-isolation"
	PolicyReservedEnvKeys = "gpuslice-reserved-env-keys"
	PolicyClaimShape      = "gpuslice-claim-shape"
	PolicyClaimGrants     = "gpuslice-claim-grants"
	PolicyClaimWholeGPUs  = "gpuslice-claim-whole-gpus"
	// PolicyClaimCapacity is in policy_capacity.go, PolicyExtendedResources
	// and PolicyExtendedGrants in policy_extended.go.
)

// PolicyNames are the platform's policies, in the order they are rendered.
var PolicyNames = []string{PolicyRawGPU, PolicySliceIsolation, PolicyReservedEnvKeys, PolicyClaimShape, PolicyClaimGrants,
	PolicyClaimWholeGPUs, PolicyClaimCapacity, PolicyExtendedResources, PolicyExtendedGrants}

// policy is one ValidatingAdmissionPolicy with how it is bound.
type policy struct {
	spec     admissionv1.ValidatingAdmissionPolicySpec
	paramRef *admissionv1.ParamRef
}

// policies renders the platform's admission policies and their bindings,
// bound to the namespaces labelled <tenant label>=true and to no other.
func (r renderer) policies(p *spec.Platform) ([]objects.Object, error) {
	schedulers := p.SchedulerUsersOrDefault()
	all := map[string]policy{
		PolicyRawGPU:            rawGPUPolicy(),
		PolicySliceIsolation:    sliceIsolationPolicy(),
		PolicyReservedEnvKeys:   reservedEnvKeysPolicy(),
		PolicyClaimShape:        claimShapePolicy(schedulers),
		PolicyClaimGrants:       claimGrantsPolicy(schedulers),
		PolicyClaimWholeGPUs:    claimWholeGPUsPolicy(schedulers),
		PolicyClaimCapacity:     claimCapacityPolicy(schedulers),
		PolicyExtendedResources: extendedResourcesPolicy(),
		PolicyExtendedGrants:    extendedGrantsPolicy(),
	}
	tenants := &metav1.LabelSelector{MatchLabels: map[string]string{r.tenantLabel(): "true"}}
	var out []objects.Object
	for _, name := range PolicyNames {
		pol := all[name]
		// A policy that cannot be evaluated denies: an escape must never
		// pass because an expression failed.
		pol.spec.FailurePolicy = ptr.To(admissionv1.Fail)
		pol.spec.MatchConstraints.MatchPolicy = ptr.To(admissionv1.Equivalent)
		vap := object(p.Address, &admissionv1.ValidatingAdmissionPolicy{
			ObjectMeta: r.meta(p.Address, "", name, nil),
			Spec:       pol.spec,
		}, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
		binding := object(p.Address, &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: r.meta(p.Address, "", name, nil),
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        name,
				ParamRef:          pol.paramRef,
				ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
				MatchResources:    &admissionv1.MatchResources{NamespaceSelector: tenants},
			},
		}, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding")
		out = append(out, vap, binding)
	}
	return out, nil
}

// rules matches operations on resources of one API group. Only v1 is
// named: with matchPolicy Equivalent the API server converts a request made
// through any other served version (resource.k8s.io/v1beta1 and v1beta2
// can be turned on) to v1 first, so the expressions always see the v1
// shape — a v1beta1 claim has no "exactly" and would otherwise pass them.
func rules(group string, ops []admissionv1.OperationType, resources ...string) admissionv1.NamedRuleWithOperations {
	return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: ops,
		Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources},
	}}
}

var createUpdate = []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}

// deny is a validation with its own message: expression must hold, and
// message says what is wrong and what to do instead.
func deny(expression, message string) admissionv1.Validation {
	return admissionv1.Validation{
		Expression:        expression,
		MessageExpression: message,
		Reason:            ptr.To(metav1.StatusReasonForbidden),
	}
}

// celList renders strings as a CEL list literal.
func celList(items []string) string {
	out := "["
	for i, s := range items {
		if i > 0 {
			out += ", "
		}
		out += celString(s)
	}
	return out + "]"
}

// celString quotes s as a CEL string literal (the inputs are fixed names
// and paths without quotes or backslashes).
func celString(s string) string { return "'" + s + "'" }

// celQuotedList renders strings a configuration supplies (user names) as a
// CEL list literal, each escaped: Go's quoting is valid CEL.
func celQuotedList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
