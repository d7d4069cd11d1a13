package render

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
)

// PolicyClaimCapacity admits a claim's capacity requests only when they
// are exactly its package's.
const PolicyClaimCapacity = "gpuslice-claim-capacity"

// claimCapacityPolicy admits a request for a package's class only with
// exactly the capacity the package's slices are: an any-size package's
// memory and compute, a time-sliced package's shares, nothing for a
// fraction or a MIG instance (its device is its size). Asking for more would take more of
// the GPU than the package; asking for nothing would take the device's
// default; and the amounts of another package would make the quota count
// one package while the claim holds another's size. Its params are every
// gpuslice DeviceClass (a paramRef selector: each is evaluated and all
// must pass), whose annotations carry the amounts (render.pkg). The
// scheduler's claims for extended resources get no waiver: it writes no
// capacity, which is right for a fraction, a whole GPU or a MIG instance,
// and for an any-size or time-sliced class would take the device's default
// instead of the package, so such a claim is refused with its own advice
// (plan refuses extended_resource_name on those packages; a pod can still
// name a class by its implicit name, deviceclass.resource.kubernetes.io/<class>).
func claimCapacityPolicy(schedulers []string) policy {
	annotation := func(key string) string {
		return `params.metadata.?annotations[?'` + key + `'].orValue('')`
	}
	requests := `r.exactly.?capacity.?requests.orValue({})`
	return policy{
		spec: admissionv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionv1.ParamKind{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
			MatchConstraints: claimKinds([]admissionv1.OperationType{admissionv1.Create}),
			Variables: append(claimVariables(schedulers),
				admissionv1.Variable{Name: "sharing", Expression: annotation(AnnotationSharing)},
				admissionv1.Variable{Name: "want", Expression: `variables.sharing == '` + contract.SharingAnySize + `' ? ` +
					`{'` + contract.CapacityMemory + `': ` + annotation(AnnotationMemory) + `, '` + contract.CapacityCompute + `': ` + annotation(AnnotationComputeShare) + `} : ` +
					`(variables.sharing == '` + contract.SharingTimeSliced + `' ? {'` + contract.CapacityShares + `': ` + annotation(AnnotationShares) + `} : {})`},
				admissionv1.Variable{Name: "wrong", Expression: `variables.exact.filter(r, r.exactly.deviceClassName == params.metadata.name && !(` +
					requests + `.all(k, k in variables.want) && variables.want.all(k, k in ` + requests + ` && ` +
					`quantity(string(` + requests + `[k])).compareTo(quantity(variables.want[k])) == 0)))`},
			),
			Validations: []admissionv1.Validation{deny(`!variables.schedulerMade || size(variables.want) == 0 || `+
				`!variables.exact.exists(r, r.exactly.deviceClassName == params.metadata.name)`,
				`variables.devicesPath + '.requests[' + variables.exact.filter(r, r.exactly.deviceClassName == params.metadata.name)[0].name + ']: ' + `+
					`'this is the claim kube-scheduler made for ' + variables.forPod[0] + '\'s extended resources, and ' + params.metadata.name + ' is ' + `+
					`(variables.sharing == '`+contract.SharingAnySize+`' ? 'an any-size package' : 'a time-sliced package') + ': asked for by an extended resource name, `+
					`a claim has no capacity and would get the device\'s default instead of the package; remove the extended resource from the pod, `+
					`and run it as a gpuslice workload of ' + params.metadata.name + ', or give it a ResourceClaimTemplate of class ' + params.metadata.name + ' with the package\'s capacity'`),
				deny(`size(variables.wrong) == 0`,
					`variables.devicesPath + '.requests[' + variables.wrong[0].name + '].exactly.capacity: ' + `+
						`(size(variables.wrong[0].exactly.?capacity.?requests.orValue({})) == 0 ? 'no capacity requests' : `+
						`'requests ' + variables.wrong[0].exactly.capacity.requests.map(k, k + '=' + string(variables.wrong[0].exactly.capacity.requests[k])).join(', ')) + `+
						`', but a slice of package ' + params.metadata.name + ' is ' + `+
						`(variables.sharing == '`+contract.SharingMIG+`' ? 'one MIG instance of profile ' + `+annotation(AnnotationMIGProfile)+` + ', sized by the GPU, which takes no capacity requests; remove capacity, and use the package of the profile you need' : `+
						`size(variables.want) == 0 ? 'a fixed fraction of a GPU, which takes no capacity requests; remove capacity' : `+
						`'exactly ' + variables.want.map(k, k + '=' + variables.want[k]).join(', ') + ': request exactly that, as the engine renders it, or use another package')`)},
		},
		paramRef: &admissionv1.ParamRef{
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: contract.LabelPackage, Operator: metav1.LabelSelectorOpExists,
			}}},
			// No gpuslice class: no claim for one can be granted either.
			ParameterNotFoundAction: ptr.To(admissionv1.AllowAction),
		},
	}
}
