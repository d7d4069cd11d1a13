package render

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// TenantRole names the ClusterRole the platform renders for tenant users
// and the RoleBinding each quota renders in its namespace to grant it.
const TenantRole = "gpuslice-tenant"

var (
	editVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	readVerbs = []string{"get", "list", "watch"}
)

// tenantRules is what a tenant may do in its namespaces: run workloads and
// claim slices in the documented shape (the admission policies check the
// shape). Deliberately absent: device classes and resource slices (cluster
// objects a RoleBinding cannot grant anyway), writes to resource quotas and
// limit ranges (read access lets tenants check their headroom), roles and
// bindings, pods/exec, pods/attach and pods/ephemeralcontainers (no way into
// a running container), and the admission policies.
func tenantRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Verbs: editVerbs, Resources: []string{
			"pods", "services", "configmaps", "secrets", "persistentvolumeclaims", "serviceaccounts"}},
		{APIGroups: []string{""}, Verbs: readVerbs, Resources: []string{
			"pods/log", "pods/status", "events", "endpoints", "resourcequotas", "limitranges"}},
		{APIGroups: []string{"apps"}, Verbs: editVerbs, Resources: []string{"deployments", "statefulsets", "replicasets"}},
		{APIGroups: []string{"apps"}, Verbs: editVerbs, Resources: []string{"deployments/scale", "statefulsets/scale"}},
		{APIGroups: []string{"batch"}, Verbs: editVerbs, Resources: []string{"jobs", "cronjobs"}},
		{APIGroups: []string{"autoscaling"}, Verbs: editVerbs, Resources: []string{"horizontalpodautoscalers"}},
		{APIGroups: []string{"keda.sh"}, Verbs: editVerbs, Resources: []string{"scaledobjects"}},
		// A training job's choice of Kubeflow's PyTorchJob; its pods still
		// pass the pod policies when the operator creates them.
		{APIGroups: []string{"kubeflow.org"}, Verbs: editVerbs, Resources: []string{"pytorchjobs"}},
		// Or Kubeflow Trainer's TrainJob, with the runtime gpuslice renders for it.
		{APIGroups: []string{"trainer.kubeflow.org"}, Verbs: editVerbs, Resources: []string{"trainjobs", "trainingruntimes"}},
		{APIGroups: []string{"resource.k8s.io"}, Verbs: editVerbs, Resources: []string{"resourceclaims", "resourceclaimtemplates"}},
		{APIGroups: []string{"resource.k8s.io"}, Verbs: readVerbs, Resources: []string{"resourceclaims/status"}},
		{APIGroups: []string{"events.k8s.io"}, Verbs: readVerbs, Resources: []string{"events"}},
		{APIGroups: []string{"discovery.k8s.io"}, Verbs: readVerbs, Resources: []string{"endpointslices"}},
	}
}

// tenantClusterRole is the platform's role for tenant users; quotas bind it
// per namespace, so the platform need not know the tenants.
func (r renderer) tenantClusterRole(p *spec.Platform) objects.Object {
	return object(p.Address, &rbacv1.ClusterRole{
		ObjectMeta: r.meta(p.Address, "", TenantRole, nil),
		Rules:      tenantRules(),
	}, "rbac.authorization.k8s.io/v1", "ClusterRole")
}

// tenantRoleBinding grants the tenant role in a quota's namespace to the
// users and groups the quota names; none when it names nobody.
func (r renderer) tenantRoleBinding(q *spec.Quota) ([]objects.Object, error) {
	var subjects []rbacv1.Subject
	for _, u := range q.TenantUsers {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	for _, g := range q.TenantGroups {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
	}
	if len(subjects) == 0 {
		return nil, nil
	}
	o := object(q.Address, &rbacv1.RoleBinding{
		ObjectMeta: r.meta(q.Address, q.Namespace, TenantRole, nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: TenantRole},
		Subjects:   subjects,
	}, "rbac.authorization.k8s.io/v1", "RoleBinding")
	return []objects.Object{o}, nil
}
