package render

import (
	"strconv"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
)

// The policies on pods that ask for a package by an extended resource name
// (DRAExtendedResource): the DeviceClass's extendedResourceName, or its
// implicit deviceclass.resource.kubernetes.io/<class>. The scheduler makes
// such a pod's claim when it has picked a node, and the claim policies
// check it then; a refusal there leaves the pod Pending with the
// scheduler's "cannot allocate all claims". These refuse the pod (or its
// template) when it is written instead, with what to do.
const (
	// PolicyExtendedResources refuses a pod asking by extended resource
	// name for a class the scheduler's claim cannot be the package of.
	PolicyExtendedResources = "gpuslice-extended-resources"
	// PolicyExtendedGrants refuses a pod asking by extended resource name
	// for more than its namespace's gpuslice quota grants.
	PolicyExtendedGrants = "gpuslice-extended-resource-grants"
)

// askOf is a CEL int: how many of the extended resources names (a CEL list
// of strings) the container, or pod-level resources, c (a CEL expression)
// ask for. A request is what counts; where only the limit is written (a
// template: the API server copies limits into requests of pods only), the
// limit, which must then equal the request.
func askOf(c, names string) string {
	return names + `.map(n, quantity(string(` + c + `.?resources.?requests[?n].orValue(` + c + `.?resources.?limits[?n].orValue('0')))).asInteger()).sum()`
}

// podAsk is a CEL int: how many devices the pod asks for by the extended
// resource names (a CEL list of strings), which is how many the
// scheduler's claim will request. Containers that run together add up
// (regular and sidecar containers); an init container runs with the
// sidecars started before it and then ends, so it adds to those alone
// (the scheduler reuses the long-lived containers' devices for it).
// Pod-level resources, where the API server allows them, are a floor.
// Each container's ask is computed once ([x].map(v, …)[0] binds x to v):
// a pod's init containers are compared pairwise.
func podAsk(names string) string {
	sidecar := `c.?restartPolicy.orValue('') == 'Always'`
	return `[variables.inits.map(c, ` + sidecar + ` ? ` + askOf("c", names) + ` : 0)].map(side, ` +
		`[variables.inits.map(c, ` + sidecar + ` ? 0 : ` + askOf("c", names) + `)].map(init, ` +
		`([variables.podSpec.?containers.orValue([]).map(c, ` + askOf("c", names) + `).sum() + side.sum(), ` + askOf("variables.podSpec", names) + `] + ` +
		`init.transformList(i, a, a > 0, a + side.transformList(j, b, j < i, b).sum())).max())[0])[0]`
}

// asking is a CEL bool: a container or the pod-level resources of
// variables.podSpec name the extended resource n (a CEL string).
func asking(n string) string {
	in := func(c string) string {
		return n + ` in ` + c + `.?resources.?requests.orValue({}) || ` + n + ` in ` + c + `.?resources.?limits.orValue({})`
	}
	return `(variables.podSpec.?containers.orValue([]) + variables.inits).exists(c, ` + in("c") + `) || ` + in("variables.podSpec")
}

// podSpecOf is the CEL pod spec of obj (object or oldObject) for every
// kind podWorkloads matches; matchConditions cannot use variables.
func podSpecOf(obj string) string {
	return `(request.kind.kind == 'Pod' ? ` + obj + `.spec : request.kind.kind == 'CronJob' ? ` + obj + `.spec.jobTemplate.spec.template.spec : ` + obj + `.spec.template.spec)`
}

// resourcesOf is a CEL list of every resources block of the pod spec ps.
func resourcesOf(ps string) string {
	return `((` + ps + `.?containers.orValue([]) + ` + ps + `.?initContainers.orValue([])).map(c, c.?resources.orValue({})) + [` + ps + `.?resources.orValue({})])`
}

// extendedMatch selects the requests worth checking: a pod or template
// naming an extended resource (a name with a '/'), when it is created or
// its resources change. Updates that leave the resources alone — scaling,
// labels, `kubectl debug` — pass, so that a grant withdrawn later never
// blocks scaling down what was admitted under it (the quota still counts
// it).
func extendedMatch() []admissionv1.MatchCondition {
	return []admissionv1.MatchCondition{
		{Name: "asks-for-extended-resources", Expression: `[` + podSpecOf("object") + `].exists(ps, ` + resourcesOf("ps") + `.exists(r, ` +
			`r.?requests.orValue({}).exists(k, k.contains('/')) || r.?limits.orValue({}).exists(k, k.contains('/'))))`},
		{Name: "creates-or-changes-resources", Expression: `request.operation == 'CREATE' || ` +
			`[` + podSpecOf("object") + `].exists(ps, [` + podSpecOf("oldObject") + `].exists(old, ` + resourcesOf("ps") + ` != ` + resourcesOf("old") + `))`},
	}
}

// extendedVariables are podVariables and the init containers.
func extendedVariables() []admissionv1.Variable {
	return append(podVariables(), admissionv1.Variable{Name: "inits", Expression: `variables.podSpec.?initContainers.orValue([])`})
}

// extendedAdvice is what a pod does instead of asking for a shared
// package by an extended resource name (class: a CEL string).
func extendedAdvice(class string) string {
	return `'run the pod as a gpuslice workload of ' + ` + class + ` + ', or give it a ResourceClaimTemplate of class ' + ` + class + ` + ` +
		`' with the package\'s capacity (spec.resourceClaims), as a workload\'s is rendered'`
}

// extendedResourcesPolicy refuses a pod asking by extended resource name
// for a package the scheduler's claim cannot be: an any-size or
// time-sliced one (the claim has no capacity, so it would get the
// device's default — a minimal slice, or every share of the GPU), or more
// than one slice of a fraction or MIG package (one claim holds one such
// slice; the node would refuse the claim, and the pod would hang holding
// the devices). Its params are every gpuslice DeviceClass (a paramRef
// selector: each is evaluated and all must pass): a class knows its kind
// and both of its names, the implicit one and extendedResourceName.
func extendedResourcesPolicy() policy {
	annotation := func(key string) string {
		return `params.metadata.?annotations[?'` + key + `'].orValue('')`
	}
	shared := `(variables.sharing in ['` + contract.SharingAnySize + `', '` + contract.SharingTimeSliced + `'])`
	vars := append(extendedVariables(),
		admissionv1.Variable{Name: "names", Expression: `['` + resourcev1.ResourceDeviceClassPrefix + `' + params.metadata.name] + ` +
			`(params.spec.?extendedResourceName.orValue('') != '' ? [params.spec.extendedResourceName] : [])`},
		admissionv1.Variable{Name: "asked", Expression: `variables.names.filter(n, ` + asking("n") + `)`},
		admissionv1.Variable{Name: "sharing", Expression: annotation(AnnotationSharing)},
		admissionv1.Variable{Name: "whole", Expression: `params.metadata.?labels[?'` + LabelFraction + `'].orValue('') == '` + strconv.Itoa(wholeGPU) + `'`},
		admissionv1.Variable{Name: "count", Expression: podAsk("variables.names")},
		// Who asks, for messages: "container app: 2 × <name>".
		admissionv1.Variable{Name: "askers", Expression: `(variables.podSpec.?containers.orValue([]) + variables.inits).map(c, variables.asked.filter(n, ` +
			`n in c.?resources.?requests.orValue({}) || n in c.?resources.?limits.orValue({})).map(n, 'container ' + c.name + ' asks for ' + string(` + askOf("c", "[n]") + `) + ' of ' + n)).flatten() + ` +
			`variables.asked.filter(n, n in variables.podSpec.?resources.?requests.orValue({}) || n in variables.podSpec.?resources.?limits.orValue({})).map(n, 'the pod-level resources ask for ' + string(` + askOf("variables.podSpec", "[n]") + `) + ' of ' + n)`},
	)
	return policy{
		spec: admissionv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionv1.ParamKind{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: podWorkloads()},
			MatchConditions:  extendedMatch(),
			Variables:        vars,
			Validations: []admissionv1.Validation{
				deny(`size(variables.asked) == 0 || !`+shared,
					`variables.askers[0] + ': ' + params.metadata.name + ' is ' + (variables.sharing == '`+contract.SharingAnySize+`' ? `+
						`'an any-size package (' + `+annotation(AnnotationMemory)+` + ' and ' + `+annotation(AnnotationComputeShare)+` + ' % compute)' : `+
						`'a time-sliced package (' + `+annotation(AnnotationReplicas)+` + ' slices per GPU)') + `+
						`', which a pod cannot ask for by an extended resource name: the claim the scheduler makes for it has no capacity and would get the device\'s default `+
						`instead of the package; remove ' + variables.asked[0] + ' from the pod\'s resources, and ' + `+extendedAdvice("params.metadata.name")),
				deny(`size(variables.asked) == 0 || variables.whole || `+shared+` || variables.count <= 1`,
					`'the pod asks for ' + string(variables.count) + ' of ' + params.metadata.name + ' (' + variables.askers.join('; ') + '), ' + `+
						`(variables.sharing == '`+contract.SharingMIG+`' ? 'a MIG package (profile ' + `+annotation(AnnotationMIGProfile)+` + '): a CUDA process uses one MIG instance' : `+
						`'a fractional package (' + params.metadata.?labels[?'`+LabelFraction+`'].orValue('unknown') + ' %): a slice\'s memory and compute limits are one budget on one GPU') + `+
						`', so a pod gets one slice of it: ask for 1 in all (requests and limits of every container, init containers included), `+
						`more replicas for more slices, or a package with fraction = 100 for several GPUs per pod'`),
			},
		},
		paramRef: &admissionv1.ParamRef{
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: contract.LabelPackage, Operator: metav1.LabelSelectorOpExists,
			}}},
			// No gpuslice class: no name of one to ask for.
			ParameterNotFoundAction: ptr.To(admissionv1.AllowAction),
		},
	}
}

// extendedGrantsPolicy refuses a pod asking by extended resource name for
// a package its namespace is not granted, or for more than the grant. The
// params are the namespace's gpuslice ResourceQuota, as for claims
// (claimGrantsPolicy). An implicit name carries its class, whose grant is
// <class>.deviceclass.resource.k8s.io/devices; an explicit name does not,
// so the quota carries requests.<name> with the package's grant (QuotaHard)
// and that is read. A name the quota does not know is not a gpuslice
// package of this namespace's configuration and is left to the scheduler
// (whose claim for a gpuslice class the claim policies still check).
// Without the quota the pod passes: the claim-grants policy, which denies
// without it, refuses the scheduler's claim, and gpuslice never makes a
// tenant namespace without one.
func extendedGrantsPolicy() policy {
	prefix := resourcev1.ResourceDeviceClassPrefix
	hard := `params.spec.?hard.orValue({})`
	grantOf := func(n string) string {
		return `(` + n + `.startsWith('` + prefix + `') ? ` +
			`((` + n + `.substring(` + strconv.Itoa(len(prefix)) + `) + '` + grantSuffix + `') in ` + hard + ` ? ` +
			`quantity(string(` + hard + `[` + n + `.substring(` + strconv.Itoa(len(prefix)) + `) + '` + grantSuffix + `'])).asInteger() : 0) : ` +
			`quantity(string(` + hard + `['requests.' + ` + n + `])).asInteger())`
	}
	// The names to check come from the quota (a handful), each looked for
	// in the pod, rather than from the pod's every resource key; and an
	// implicit name of a class the quota does not know, the first one.
	keys := func(c string) string {
		return c + `.?resources.?requests.orValue({}).map(k, k) + ` + c + `.?resources.?limits.orValue({}).map(k, k)`
	}
	vars := append(extendedVariables(),
		admissionv1.Variable{Name: "quotaNames", Expression: hard + `.map(k, k.endsWith('` + grantSuffix + `') ? '` + prefix + `' + k.substring(0, size(k) - size('` + grantSuffix + `')) : ` +
			`k.startsWith('requests.') && k.contains('/') ? k.substring(size('requests.')) : '').filter(n, n != '')`},
		admissionv1.Variable{Name: "unknown", Expression: `((variables.podSpec.?containers.orValue([]) + variables.inits).map(c, ` + keys("c") + `).flatten() + ` + keys("variables.podSpec") + `)` +
			`.filter(n, n.startsWith('` + prefix + `') && !((n.substring(` + strconv.Itoa(len(prefix)) + `) + '` + grantSuffix + `') in ` + hard + `))`},
		admissionv1.Variable{Name: "names", Expression: `variables.quotaNames.filter(n, ` + asking("n") + `) + (size(variables.unknown) > 0 ? [variables.unknown[0]] : [])`},
		admissionv1.Variable{Name: "over", Expression: `variables.names.filter(n, ` + podAsk("[n]") + ` > ` + grantOf("n") + `)`},
		admissionv1.Variable{Name: "name", Expression: `variables.over[0]`},
		admissionv1.Variable{Name: "asked", Expression: podAsk("[variables.name]")},
		admissionv1.Variable{Name: "grant", Expression: grantOf("variables.name")},
		admissionv1.Variable{Name: "granted", Expression: hard + `.filter(k, k.endsWith('` + grantSuffix + `') && ` +
			`quantity(string(params.spec.hard[k])).isGreaterThan(quantity('0'))).map(k, k.substring(0, size(k) - size('` + grantSuffix + `')))`},
	)
	what := `(variables.name.startsWith('` + prefix + `') ? 'class ' + variables.name.substring(` + strconv.Itoa(len(prefix)) + `) : variables.name)`
	return policy{
		spec: admissionv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionv1.ParamKind{APIVersion: "v1", Kind: "ResourceQuota"},
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: podWorkloads()},
			MatchConditions:  extendedMatch(),
			Variables:        vars,
			Validations: []admissionv1.Validation{deny(`size(variables.over) == 0`,
				`'resources[' + variables.name + ']: the pod asks for ' + string(variables.asked) + ', but ' + `+
					`(variables.grant == 0 ? `+what+` + ' is not granted to namespace ' + request.namespace + ': its gpuslice quota grants ' + `+
					`(size(variables.granted) == 0 ? 'no package' : variables.granted.sort().join(', ')) + '; ask for one of those, `+
					`or ask the platform team to add the package to the namespace\'s gpuslice_quota' : `+
					`'namespace ' + request.namespace + '\'s gpuslice quota grants ' + string(variables.grant) + ' of ' + `+what+` + `+
					`': ask for at most that many in all (requests and limits of every container, init containers included), `+
					`or ask the platform team to raise the package\'s slices in the namespace\'s gpuslice_quota')`)},
		},
		paramRef: &admissionv1.ParamRef{Name: QuotaName, ParameterNotFoundAction: ptr.To(admissionv1.AllowAction)},
	}
}
