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

// claimWholeGPUsPolicy refuses a claim asking for more than one device
// when one of them is of a class that is not whole GPUs: a fractional
// slice's memory and compute limits are one budget on one GPU, and the
// node plugin keeps one budget per claim, so the engine never renders such
// a claim. A tenant's claim has one request (claimShapePolicy), so this is
// its count; the scheduler's claim for a pod's extended resources has a
// request per container and resource, so its counts are added up. Its
// params are every DeviceClass not labelled whole-GPU (a paramRef
// selector: each selected class is evaluated and all must pass); an
// unlabelled class is selected too, so a class counts as whole GPUs only
// when the engine said so.
func claimWholeGPUsPolicy(schedulers []string) policy {
	mine := `variables.exact.filter(r, r.exactly.deviceClassName == params.metadata.name)`
	return policy{
		spec: admissionv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionv1.ParamKind{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
			MatchConstraints: claimKinds([]admissionv1.OperationType{admissionv1.Create}),
			Variables: append(claimVariables(schedulers),
				admissionv1.Variable{Name: "total", Expression: `variables.exact.map(r, r.exactly.?count.orValue(1)).sum()`},
				// A tenant's claim of several requests is the shape policy's
				// to refuse, with its own message.
				admissionv1.Variable{Name: "several", Expression: `variables.total > 1 && (variables.schedulerMade || size(variables.exact) == 1) ? ` + mine + ` : []`}),
			Validations: []admissionv1.Validation{deny(`size(variables.several) == 0`,
				`variables.devicesPath + '.requests[' + variables.several[0].name + '].exactly.count: ' + `+
					`(size(variables.exact) == 1 ? string(variables.total) + ' devices of ' : `+
					`string(variables.total) + ' devices in ' + string(size(variables.exact)) + ' requests, ' + string(variables.several[0].exactly.?count.orValue(1)) + ' of ') + `+
					`params.metadata.name + (params.metadata.?annotations[?'`+AnnotationSharing+`'].orValue('') == '`+contract.SharingMIG+`' ? `+
					`', a MIG package (profile ' + params.metadata.?annotations[?'`+AnnotationMIGProfile+`'].orValue('unknown') + '): a CUDA process uses one MIG instance, so a claim takes one; ' : `+
					`', a fractional package (`+LabelFraction+` ' + params.metadata.?labels[?'`+LabelFraction+`'].orValue('unknown') + '): `+
					`a slice\'s memory and compute limits are one budget on one GPU, so a claim takes one slice of it and nothing else; ') + `+
					`(variables.schedulerMade ? 'this is the claim kube-scheduler made for ' + variables.forPod[0] + '\'s extended resources: ask for 1 of the package in all (every container\'s requests and limits, init containers included), ' + `+
					`'more replicas for more slices, or a package with fraction = 100 for several GPUs per pod' : `+
					`'set count to 1 (more replicas for more slices), or use a package with fraction = 100 for several GPUs per pod')`)},
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
// The counts of a class are added up over the claim's requests (the
// scheduler's claim has one per container).
func claimOverGrant() (admissionv1.Variable, admissionv1.Validation) {
	key := func(class string) string { return `(` + class + ` + '` + grantSuffix + `')` }
	asked := func(class string) string {
		return `variables.exact.filter(r, r.exactly.deviceClassName == ` + class + `).map(r, r.exactly.?count.orValue(1)).sum()`
	}
	v := admissionv1.Variable{Name: "overGrant", Expression: `variables.exact.map(r, r.exactly.deviceClassName).filter(c, ` +
		key("c") + ` in params.spec.?hard.orValue({}) && quantity(string(params.spec.hard[` + key("c") + `])).isLessThan(quantity(string(` + asked("c") + `))))`}
	over := `variables.overGrant[0]`
	first := `variables.exact.filter(r, r.exactly.deviceClassName == ` + over + `)[0].name`
	return v, deny(`size(variables.overGrant) == 0`,
		`variables.devicesPath + '.requests[' + `+first+` + '].exactly.count: ' + string(`+asked(over)+`) + ' devices of ' + `+over+` + `+
			`' but namespace ' + request.namespace + '\'s gpuslice quota grants ' + string(params.spec.hard[`+key(over)+`]) + `+
			`(variables.schedulerMade ? ' (this is the claim kube-scheduler made for ' + variables.forPod[0] + '\'s extended resources)' : '') + `+
			`': ask for at most that many, or ask the platform team to raise slices[' + `+over+` + '] in the namespace\'s gpuslice_quota'`)
}
