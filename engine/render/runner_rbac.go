package render

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// applyVerbs are what applying, adopting and deleting an object needs.
var applyVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// RunnerRules are the least a runner needs to apply any gpuslice stack
// (platform, packages, quotas, workloads): the kinds the engine manages,
// derived from its list so that a new kind is granted with it, and what
// its checks and status read. Not granted: secrets (no stack renders one),
// pods/exec, nodes' writes, and the right to grant any role but the
// two gpuslice renders, the tenant role and the node plugin's (escalate and
// bind are limited to them by name).
func RunnerRules() []rbacv1.PolicyRule {
	byGroup := map[string][]string{}
	var groups []string
	for _, k := range objects.Kinds() {
		if _, ok := byGroup[k.GVR.Group]; !ok {
			groups = append(groups, k.GVR.Group)
		}
		byGroup[k.GVR.Group] = append(byGroup[k.GVR.Group], k.GVR.Resource)
	}
	var rules []rbacv1.PolicyRule
	for _, g := range groups {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: byGroup[g], Verbs: applyVerbs})
	}
	return append(rules,
		// The stack's state lock and inventory live in its namespace.
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: applyVerbs},
		// A changed pod template's pods are replaced; drains evict.
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes", "events", "limitranges", "pods/log"}, Verbs: readVerbs},
		rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: readVerbs},
		rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices", "resourceclaims", "devicetaintrules"}, Verbs: readVerbs},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: readVerbs},
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate", "bind"},
			ResourceNames: []string{TenantRole, NodePluginDaemonSet}},
	)
}

// RunnerStateRules are OpenTofu's kubernetes backend in the runner's
// namespace: the state Secret and the lock Lease it creates and updates.
func RunnerStateRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: applyVerbs},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: applyVerbs},
	}
}

// RunnerRBAC are the runner's roles and the bindings of both to the
// ServiceAccount namespace/name (tofu-controller's is flux-system/tf-runner).
func RunnerRBAC(namespace, serviceAccount string) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding) {
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: serviceAccount}}
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: contract.RunnerRole},
		Rules:      RunnerRules(),
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: contract.RunnerRole + "-" + namespace + "-" + serviceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: contract.RunnerRole},
		Subjects:   subjects,
	}
	state := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: contract.RunnerStateRole, Namespace: namespace},
		Rules:      RunnerStateRules(),
	}
	stateBinding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: contract.RunnerStateRole + "-" + serviceAccount, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: contract.RunnerStateRole},
		Subjects:   subjects,
	}
	return role, binding, state, stateBinding
}

// runnerRBAC renders the runner's ClusterRole, for the platform's runner
// block and for its in-cluster reconciler (bound by the chart), and with a
// runner block its bindings to the runner's ServiceAccount and the state
// Role; all owned by the platform.
func (r renderer) runnerRBAC(p *spec.Platform) ([]objects.Object, error) {
	var typed []runtime.Object
	if p.Runner != nil {
		role, binding, state, stateBinding := RunnerRBAC(p.Runner.Namespace, p.Runner.ServiceAccount)
		typed = []runtime.Object{role, binding, state, stateBinding}
	} else {
		role, _, _, _ := RunnerRBAC("", "")
		typed = []runtime.Object{role}
	}
	var out []objects.Object
	for _, t := range typed {
		m := t.(metav1.Object)
		meta := r.meta(p.Address, m.GetNamespace(), m.GetName(), nil)
		m.SetLabels(meta.Labels)
		m.SetAnnotations(meta.Annotations)
		gvk := t.GetObjectKind().GroupVersionKind()
		obj := object(p.Address, t, gvk.GroupVersion().String(), gvk.Kind)
		out = append(out, obj)
	}
	return out, nil
}
