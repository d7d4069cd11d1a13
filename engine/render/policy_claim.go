package render

import (
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
)

// claimKinds are the resources whose device requests a tenant writes.
func claimKinds(ops []admissionv1.OperationType) *admissionv1.MatchResources {
	return &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
		rules("resource.k8s.io", ops, "resourceclaims", "resourceclaimtemplates"),
	}}
}

// claimVariables find the claim spec of a ResourceClaim or of the claims a
// ResourceClaimTemplate stamps out, the labels those claims carry, and the
// field path to name in messages. schedulers are the users kube-scheduler
// authenticates as.
func claimVariables(schedulers []string) []admissionv1.Variable {
	return []admissionv1.Variable{
		{Name: "isTemplate", Expression: `request.kind.kind == 'ResourceClaimTemplate'`},
		{Name: "devicesPath", Expression: `variables.isTemplate ? 'spec.spec.devices' : 'spec.devices'`},
		{Name: "devices", Expression: `(variables.isTemplate ? object.spec.spec : object.spec).?devices.orValue({})`},
		{Name: "requests", Expression: `variables.devices.?requests.orValue([])`},
		{Name: "exact", Expression: `variables.requests.filter(r, has(r.exactly))`},
		{Name: "claimLabels", Expression: `variables.isTemplate ? object.spec.?metadata.?labels.orValue({}) : object.metadata.?labels.orValue({})`},
		// The scheduler's claim for a pod that asks for a package by an
		// extended resource name (DRAExtendedResource): unlabelled, one
		// request per container, count = the quantity asked for. It is
		// recognised by who makes it, the one thing a tenant cannot write;
		// the annotation and the owner reference are the tenant's to forge.
		// Only the one-request and label rules are waived for it: its
		// counts, capacity and grants are checked as any claim's.
		{Name: "schedulerMade", Expression: `!variables.isTemplate && request.userInfo.username in ` + celQuotedList(schedulers) + ` && ` +
			`object.metadata.?annotations[?'` + resourcev1.ExtendedResourceClaimAnnotation + `'].orValue('') == 'true'`},
		// For messages: the pod the scheduler made the claim for (first).
		{Name: "forPod", Expression: `object.metadata.?ownerReferences.orValue([]).filter(o, o.kind == 'Pod').map(o, 'pod ' + o.name) + ['its pod']`},
	}
}

// requestField is a CEL list of "<path>.requests[<name>].exactly.<field>"
// for the exact requests where the CEL condition bad (over r.exactly as e)
// holds.
func requestField(field, bad string) string {
	return `variables.exact.filter(r, [r.exactly].exists(e, ` + bad + `))` +
		`.map(r, variables.devicesPath + '.requests[' + r.name + '].exactly.` + field + `')`
}

// documentedShape is how a claim template looks when the engine renders it.
const documentedShape = `exactly { deviceClassName: <package>, count: 1 (a whole-GPU package: up to the namespace grant), capacity: exactly the package amounts (any-size and time-sliced packages only) } with the label ` + contract.LabelPackage + `: <package>`

// claimShapePolicy admits only the documented claim shape: one request,
// exactly some devices of a class (how many: claimWholeGPUsPolicy and the
// grants policy; which capacity: claimCapacityPolicy), nothing that widens
// or reconfigures what the class selects. Claim specs are immutable, so updates are checked only
// when they change labels (the resourceclaim controller's finalizer updates
// must never be refused).
func claimShapePolicy(schedulers []string) policy {
	exactFields := []string{"deviceClassName", "count", "allocationMode", "selectors", "adminAccess", "capacity", "tolerations"}
	shape := func(field, bad, why string) admissionv1.Validation {
		list := requestField(field, bad)
		return deny(`size(`+list+`) == 0`, list+`[0] + ': `+strings.ReplaceAll(why, "'", `\'`)+`; a gpuslice claim is `+documentedShape+`'`)
	}
	label := `variables.claimLabels[?'` + contract.LabelPackage + `'].orValue('')`
	return policy{spec: admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: claimKinds(createUpdate),
		MatchConditions: []admissionv1.MatchCondition{{Name: "creates-or-relabels", Expression: `request.operation == 'CREATE' || ` +
			`object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({})`}},
		Variables: claimVariables(schedulers),
		Validations: []admissionv1.Validation{
			deny(`variables.schedulerMade || size(variables.requests) == 1`,
				`variables.devicesPath + '.requests has ' + string(size(variables.requests)) + ' requests: a gpuslice claim has one request; `+
					`write one request, `+documentedShape+`, and use one claim per pod'`),
			deny(`variables.requests.all(r, !has(r.firstAvailable))`,
				`variables.devicesPath + '.requests[' + variables.requests.filter(r, has(r.firstAvailable))[0].name + '].firstAvailable: `+
					`alternatives are not part of a gpuslice claim; request one package: `+documentedShape+`'`),
			// The same refusal as the next, with a message for the two ways
			// around a MIG package: naming a GPU or instance, or another
			// profile.
			shape("selectors", `has(e.selectors) && e.selectors.exists(s, `+selectorNames(`'uuid'`, `'UUID'`)+`)`,
				`a claim may not name a GPU or MIG instance (uuid, parentUUID): the scheduler gives one of the package's devices wherever it is free; remove the selectors`),
			shape("selectors", `has(e.selectors) && e.selectors.exists(s, `+selectorNames(celString(contract.AttrMIGProfile), celString(contract.AttrSharing))+`)`,
				`the package's DeviceClass selects its kind and MIG profile; a claim may not pick another: remove the selectors, and use the package of the profile you need`),
			shape("selectors", `has(e.selectors)`, `the package's DeviceClass already selects the GPU model and slice size; remove the selectors, or use another package`),
			shape("adminAccess", `e.?adminAccess.orValue(false)`, `admin access reaches devices in use by other tenants; remove adminAccess`),
			shape("allocationMode", `e.?allocationMode.orValue('ExactCount') != 'ExactCount'`, `allocationMode All would take every matching slice; remove allocationMode`),
			shape("tolerations", `has(e.tolerations)`, `tolerations would place the claim on slices taken out of service; remove tolerations`),
			deny(`!has(variables.devices.config)`,
				`variables.devicesPath + '.config: the gpuslice node plugin configures the slice from its package; remove the opaque config'`),
			deny(`!has(variables.devices.constraints)`,
				`variables.devicesPath + '.constraints: a gpuslice claim has one request and no constraints; remove them'`),
			// Fields added to the API later are refused until gpuslice knows
			// what they do.
			deny(`variables.devices.all(k, k in ['requests', 'config', 'constraints'])`,
				`variables.devicesPath + '.' + variables.devices.filter(k, !(k in ['requests', 'config', 'constraints']))[0] + ': not part of a gpuslice claim; remove it'`),
			deny(`variables.exact.all(r, r.exactly.all(k, k in `+celList(exactFields)+`))`,
				`variables.exact.filter(r, !r.exactly.all(k, k in `+celList(exactFields)+`)).map(r, variables.devicesPath + '.requests[' + r.name + `+
					`'].exactly.' + r.exactly.filter(k, !(k in `+celList(exactFields)+`))[0])[0] + ': not part of a gpuslice claim; remove it; a gpuslice claim is `+documentedShape+`'`),
			deny(`variables.schedulerMade || size(variables.exact) != 1 || `+label+` == variables.exact[0].exactly.deviceClassName`,
				`(variables.isTemplate ? 'spec.metadata' : 'metadata') + '.labels[`+contract.LabelPackage+`] is \'' + `+label+` + '\' but the claim requests class \'' + `+
					`variables.exact[0].exactly.deviceClassName + '\': label the claim with its package (the DeviceClass name)'`),
			deny(`!variables.isTemplate || size(variables.exact) != 1 || !(`+celString(contract.LabelPackage)+` in object.metadata.?labels.orValue({})) || `+
				`object.metadata.labels[`+celString(contract.LabelPackage)+`] == variables.exact[0].exactly.deviceClassName`,
				`'metadata.labels[`+contract.LabelPackage+`] is \'' + object.metadata.labels[`+celString(contract.LabelPackage)+`] + '\' but the template requests class \'' + `+
					`variables.exact[0].exactly.deviceClassName + '\': label the template with its package (the DeviceClass name)'`),
		},
	}}
}

// selectorNames is a CEL condition over a device selector s: its
// expression mentions one of the quoted names.
func selectorNames(quoted ...string) string {
	var parts []string
	for _, q := range quoted {
		parts = append(parts, `s.?cel.?expression.orValue('').contains(`+q+`)`)
	}
	return strings.Join(parts, " || ")
}

// grantSuffix ends the ResourceQuota key counting a class's devices.
const grantSuffix = ".deviceclass.resource.k8s.io/devices"

// claimGrantsPolicy admits a claim only for a class the namespace's
// gpuslice ResourceQuota grants at least one device of, and for at most
// that many. The quota is the binding's params object, looked up in the
// claim's namespace; without it the claim is refused. The scheduler's
// claims are held to it like any other. Checked on create only: a claim
// made under a grant stays valid when the grant is withdrawn (the quota
// still counts it).
func claimGrantsPolicy(schedulers []string) policy {
	overGrant, overGrantRule := claimOverGrant()
	return policy{
		spec: admissionv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionv1.ParamKind{APIVersion: "v1", Kind: "ResourceQuota"},
			MatchConstraints: claimKinds([]admissionv1.OperationType{admissionv1.Create}),
			Variables: append(claimVariables(schedulers),
				admissionv1.Variable{Name: "granted", Expression: `params.spec.?hard.orValue({}).filter(k, k.endsWith('` + grantSuffix + `') && ` +
					`quantity(string(params.spec.hard[k])).isGreaterThan(quantity('0'))).map(k, k.substring(0, size(k) - ` +
					`size('` + grantSuffix + `')))`},
				admissionv1.Variable{Name: "notGranted", Expression: `variables.exact.map(r, r.exactly.deviceClassName).filter(c, !(c in variables.granted))`},
				overGrant,
			),
			Validations: []admissionv1.Validation{deny(`size(variables.notGranted) == 0`,
				`'deviceClassName ' + variables.notGranted[0] + ' is not granted to namespace ' + request.namespace + ': its gpuslice quota grants ' + `+
					`(size(variables.granted) == 0 ? 'no package' : variables.granted.sort().join(', ')) + '; use one of those, `+
					`or ask the platform team to add the package to the namespace\'s gpuslice_quota'`), overGrantRule},
		},
		paramRef: &admissionv1.ParamRef{Name: QuotaName, ParameterNotFoundAction: ptr.To(admissionv1.DenyAction)},
	}
}
