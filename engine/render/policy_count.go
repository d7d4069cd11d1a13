package render

import (
	"strconv"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
)

// LabelFraction labels a package's DeviceClass with its fraction, so the
// whole-GPU policy can select the classes that are not whole GPUs.
const LabelFraction = "gpuslice.dev/fraction"

// wholeGPU is the fraction of a whole-GPU package, the only kind a claim
// may ask several devices of.
const wholeGPU = 100

// claimWholeGPUsPolicy refuses a claim asking for more than one device of
// a class that is not whole GPUs: a fractional slice's memory and compute
// limits are one budget on one GPU, so the engine never renders such a
// claim. Its params are every DeviceClass not labelled whole-GPU (a
// paramRef selector: each selected class is evaluated and all must pass);
// an unlabelled class is selected too, so a class counts as whole GPUs
// only when the engine said so. The scheduler's claims for extended
// resources keep their waiver (see claimVariables).
func claimWholeGPUsPolicy() policy {
	return policy{
		spec: admissionv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionv1.ParamKind{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
			MatchConstraints: claimKinds([]admissionv1.OperationType{admissionv1.Create}),
			Variables: append(claimVariables(), admissionv1.Variable{Name: "several",
				Expression: `variables.schedulerMade ? [] : variables.exact.filter(r, r.exactly.deviceClassName == params.metadata.name && r.exactly.?count.orValue(1) > 1)`}),
			Validations: []admissionv1.Validation{deny(`size(variables.several) == 0`,
				`variables.devicesPath + '.requests[' + variables.several[0].name + '].exactly.count: ' + string(variables.several[0].exactly.count) + ' devices of ' + `+
					`params.metadata.name + (params.metadata.?annotations[?'`+AnnotationSharing+`'].orValue('') == '`+contract.SharingMIG+`' ? `+
					`', a MIG package (profile ' + params.metadata.?annotations[?'`+AnnotationMIGProfile+`'].orValue('unknown') + '): a CUDA process uses one MIG instance, so a claim takes one; ' : `+
					`', a fractional package (`+LabelFraction+` ' + params.metadata.?labels[?'`+LabelFraction+`'].orValue('unknown') + '): `+
					`a slice\'s memory and compute limits are one budget on one GPU, so a claim takes one slice of it; ') + `+
					`'set count to 1 (more replicas for more slices), or use a package with fraction = 100 for several GPUs per pod'`)},
		},
		paramRef: &admissionv1.ParamRef{
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: LabelFraction, Operator: metav1.LabelSelectorOpNotIn, Values: []string{strconv.Itoa(wholeGPU)},
			}}},
			// No class that is not whole GPUs: nothing to refuse.
			ParameterNotFoundAction: ptr.To(admissionv1.AllowAction),
		},
	}
}

// claimOverGrant is the claim-grants rule on counts: a claim asks for at
// most as many devices of a class as the namespace's quota grants, since
// the quota would refuse more for good (the claim could never be made).
func claimOverGrant() (admissionv1.Variable, admissionv1.Validation) {
	grant := `params.spec.hard[r.exactly.deviceClassName + '` + grantSuffix + `']`
	v := admissionv1.Variable{Name: "overGrant", Expression: `variables.exact.filter(r, ` +
		`(r.exactly.deviceClassName + '` + grantSuffix + `') in params.spec.?hard.orValue({}) && ` +
		`quantity(string(` + grant + `)).isLessThan(quantity(string(r.exactly.?count.orValue(1)))))`}
	over := `variables.overGrant[0]`
	return v, deny(`size(variables.overGrant) == 0`,
		`variables.devicesPath + '.requests[' + `+over+`.name + '].exactly.count: ' + string(`+over+`.exactly.count) + ' devices of ' + `+over+`.exactly.deviceClassName + `+
			`' but namespace ' + request.namespace + '\'s gpuslice quota grants ' + string(params.spec.hard[`+over+`.exactly.deviceClassName + '`+grantSuffix+`']) + `+
			`': ask for at most that many, or ask the platform team to raise slices[' + `+over+`.exactly.deviceClassName + '] in the namespace\'s gpuslice_quota'`)
}
