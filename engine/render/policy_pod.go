package render

import (
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/gpuslice/gpuslice/contract"
)

// ReservedEnvNames are environment variables a tenant container may not
// set: the node plugin sets them (or the container runtime reads them) to
// confine a container to its slice. ReservedEnvPrefixes reserve whole
// families.
var (
	ReservedEnvNames    = contract.ReservedEnvNames
	ReservedEnvPrefixes = contract.ReservedEnvPrefixes
)

// ProtectedContainerPaths are paths inside the container that the node
// plugin mounts to enforce the slice; no volume may be mounted over them,
// above them or into them. /var/run is a link to /run in most images.
var ProtectedContainerPaths = []string{
	contract.ContainerPreloadPath,
	contract.ContainerLibraryDir,
	contract.ContainerAccountingDir,
	"/var" + contract.ContainerAccountingDir,
}

// AllowedCapabilities are the capabilities a tenant container may add: the
// Pod Security "baseline" set without MKNOD (device nodes of other GPUs).
var AllowedCapabilities = []string{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE",
	"SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// podWorkloads are every resource that carries a pod spec, so a pod
// template is refused when it is written, not when its controller fails to
// create pods from it. ephemeralcontainers: `kubectl debug` adds containers
// to a running pod.
func podWorkloads() []admissionv1.NamedRuleWithOperations {
	return []admissionv1.NamedRuleWithOperations{
		rules("", createUpdate, "pods", "pods/ephemeralcontainers", "replicationcontrollers"),
		rules("apps", createUpdate, "deployments", "statefulsets", "daemonsets", "replicasets"),
		rules("batch", createUpdate, "jobs", "cronjobs"),
	}
}

// podVariables find the pod spec wherever the kind keeps it and list every
// container of it (init and ephemeral containers run on the slice too).
func podVariables() []admissionv1.Variable {
	return []admissionv1.Variable{
		{Name: "podSpec", Expression: `request.kind.kind == 'Pod' ? object.spec : ` +
			`request.kind.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.spec : object.spec.template.spec`},
		{Name: "containers", Expression: `variables.podSpec.?containers.orValue([]) + ` +
			`variables.podSpec.?initContainers.orValue([]) + variables.podSpec.?ephemeralContainers.orValue([])`},
	}
}

// rawGPUPolicy refuses nvidia.com/* extended resources (the device plugin's
// whole GPUs) in containers and pod-level resources.
func rawGPUPolicy() policy {
	nvidia := `.filter(k, k.startsWith('nvidia.com/'))`
	return policy{spec: admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: podWorkloads()},
		Variables: append(podVariables(), admissionv1.Variable{Name: "rawGPU", Expression: `variables.containers.map(c, ` +
			`c.?resources.?limits.orValue({})` + nvidia + `.map(k, 'container ' + c.name + ' limits ' + k) + ` +
			`c.?resources.?requests.orValue({})` + nvidia + `.map(k, 'container ' + c.name + ' requests ' + k)).flatten() + ` +
			`variables.podSpec.?resources.?limits.orValue({})` + nvidia + `.map(k, 'pod limits ' + k) + ` +
			`variables.podSpec.?resources.?requests.orValue({})` + nvidia + `.map(k, 'pod requests ' + k)`}),
		Validations: []admissionv1.Validation{deny(`size(variables.rawGPU) == 0`,
			`variables.rawGPU[0] + ': shared GPU capacity is offered through gpuslice packages: use a gpuslice workload, `+
				`or a ResourceClaim of a DeviceClass your namespace is granted (the <class>.deviceclass.resource.k8s.io/devices `+
				`entries of: kubectl get resourcequota gpuslice -o yaml)'`)},
	}}
}

// reservedEnv is a CEL condition: the string expression name is a reserved
// environment variable.
func reservedEnv(name string) string {
	var prefixes []string
	for _, p := range ReservedEnvPrefixes {
		prefixes = append(prefixes, name+".startsWith("+celString(p)+")")
	}
	return "(" + name + " in " + celList(ReservedEnvNames) + " || " + strings.Join(prefixes, " || ") + ")"
}

// reservedPrefix is a CEL condition: prepended to some key by envFrom, the
// non-empty string expression prefix can spell a reserved variable.
func reservedPrefix(prefix string) string {
	return "(" + celList(ReservedEnvNames) + ".exists(n, n.startsWith(" + prefix + ")) || " +
		celList(ReservedEnvPrefixes) + ".exists(r, r.startsWith(" + prefix + ") || " + prefix + ".startsWith(r)))"
}

// sliceIsolationPolicy closes the ways around a slice from inside a pod:
// privileges, host namespaces, capabilities, host paths, the shim's
// environment and the files the node plugin mounts.
func sliceIsolationPolicy() policy {
	capName := `(x.upperAscii().startsWith('CAP_') ? x.upperAscii().substring(4) : x.upperAscii())`
	vars := append(podVariables(),
		admissionv1.Variable{Name: "privileged", Expression: `variables.containers.filter(c, c.?securityContext.?privileged.orValue(false)).map(c, c.name)`},
		admissionv1.Variable{Name: "capabilities", Expression: `variables.containers.map(c, c.?securityContext.?capabilities.?add.orValue([])` +
			`.filter(x, !(` + capName + ` in ` + celList(AllowedCapabilities) + `)).map(x, 'container ' + c.name + ' adds capability ' + x)).flatten()`},
		admissionv1.Variable{Name: "hostPaths", Expression: `variables.podSpec.?volumes.orValue([]).filter(v, has(v.hostPath)).map(v, v.name + ' (' + v.hostPath.path + ')')`},
		admissionv1.Variable{Name: "env", Expression: `variables.containers.map(c, c.?env.orValue([]).filter(e, ` + reservedEnv("e.name") + `)` +
			`.map(e, 'container ' + c.name + ' sets ' + e.name)).flatten()`},
		admissionv1.Variable{Name: "envFrom", Expression: `variables.containers.map(c, c.?envFrom.orValue([]).filter(f, f.?prefix.orValue('') != '' && ` +
			reservedPrefix("f.prefix") + `).map(f, 'container ' + c.name + ' reads envFrom with prefix ' + f.prefix)).flatten()`},
		// Mounts over, above or into a protected path. The path is cleaned
		// of the empty and "." segments the runtime ignores; ".." is refused.
		admissionv1.Variable{Name: "shadowing", Expression: `variables.containers.map(c, c.?volumeMounts.orValue([]).filter(m, ` +
			`m.mountPath.split('/').exists(s, s == '..') || ['/' + m.mountPath.split('/').filter(s, s != '' && s != '.').join('/')].exists(clean, ` +
			`clean == '/' || ` + celList(ProtectedContainerPaths) + `.exists(p, clean == p || p.startsWith(clean + '/') || clean.startsWith(p + '/'))))` +
			`.map(m, 'container ' + c.name + ' mounts a volume at ' + m.mountPath)).flatten()`},
	)
	return policy{spec: admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: podWorkloads()},
		Variables:        vars,
		Validations: []admissionv1.Validation{
			deny(`size(variables.privileged) == 0`,
				`'container ' + variables.privileged[0] + ' is privileged: a privileged container sees every GPU of the node and escapes its slice; `+
					`remove securityContext.privileged (the slice is reached through the pod\'s ResourceClaim)'`),
			deny(`!variables.podSpec.?hostPID.orValue(false)`,
				`'hostPID: the node\'s process namespace exposes other tenants\' GPU processes and the slice accounting; remove hostPID'`),
			deny(`!variables.podSpec.?hostIPC.orValue(false)`,
				`'hostIPC: the node\'s IPC namespace holds other tenants\' CUDA IPC and shared memory; remove hostIPC'`),
			deny(`size(variables.capabilities) == 0`,
				`variables.capabilities[0] + ': capabilities such as SYS_ADMIN, SYS_PTRACE or MKNOD reach the GPU around the slice; `+
					`drop it (allowed: `+strings.Join(AllowedCapabilities, ", ")+`)'`),
			deny(`size(variables.hostPaths) == 0`,
				`'hostPath volume ' + variables.hostPaths[0] + ': host paths reach the node\'s /dev/nvidia* devices, CDI specs (/etc/cdi, /var/run/cdi), `+
					`/var/lib/kubelet and the gpuslice shim and accounting directories; use a PersistentVolumeClaim or an emptyDir instead'`),
			deny(`size(variables.env) == 0`,
				`variables.env[0] + ': the gpuslice node plugin sets this variable to confine the container to its slice `+
					`(reserved: `+strings.Join(ReservedEnvNames, ", ")+`, `+strings.Join(ReservedEnvPrefixes, "*, ")+`*); remove it'`),
			deny(`size(variables.envFrom) == 0`,
				`variables.envFrom[0] + ': with this prefix a ConfigMap or Secret key could set a variable the gpuslice node plugin reserves `+
					`(`+strings.Join(ReservedEnvNames, ", ")+`, `+strings.Join(ReservedEnvPrefixes, "*, ")+`*); use another prefix'`),
			deny(`size(variables.shadowing) == 0`,
				`variables.shadowing[0] + ': it would hide what the gpuslice node plugin mounts to enforce the slice (`+
					strings.Join(ProtectedContainerPaths, ", ")+`); mount the volume somewhere else'`),
		},
	}}
}

// reservedEnvKeysPolicy refuses ConfigMap and Secret keys named like a
// reserved variable: `envFrom` without a prefix turns every key into a
// variable, and the pod policy cannot see the keys.
func reservedEnvKeysPolicy() policy {
	return policy{spec: admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
			rules("", createUpdate, "configmaps", "secrets"),
		}},
		Variables: []admissionv1.Variable{{Name: "reserved", Expression: `(object.?data.orValue({}).filter(k, ` + reservedEnv("k") + `) + ` +
			`object.?binaryData.orValue({}).filter(k, ` + reservedEnv("k") + `))`}},
		Validations: []admissionv1.Validation{deny(`size(variables.reserved) == 0`,
			`request.kind.kind + ' key ' + variables.reserved[0] + ': read with envFrom it would override a variable the gpuslice node plugin sets `+
				`to confine a container to its slice; rename the key'`)},
	}}
}
