package render

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) && len(r.ResourceNames) == 0 {
			return true
		}
	}
	return false
}

// The runner may apply and delete every kind the engine manages, and
// nothing grants it secrets, wildcards, or escalation beyond gpuslice's
// own roles.
func TestRunnerRules(t *testing.T) {
	rules := RunnerRules()
	for _, k := range objects.Kinds() {
		for _, verb := range []string{"get", "list", "create", "patch", "delete"} {
			if !allows(rules, k.GVR.Group, k.GVR.Resource, verb) {
				t.Errorf("the runner role cannot %s %s, which the engine manages", verb, k.GVR.Resource)
			}
		}
	}
	for _, r := range rules {
		if slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*") || slices.Contains(r.Verbs, "*") || slices.Contains(r.APIGroups, "*") {
			t.Errorf("the runner role grants %v", r)
		}
		if (slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "impersonate")) &&
			!slices.Equal(r.ResourceNames, []string{TenantRole, NodePluginDaemonSet}) {
			t.Errorf("the runner role may escalate, bind or impersonate beyond gpuslice's roles: %v", r)
		}
	}
	state := RunnerStateRules()
	if !allows(state, "", "secrets", "update") || !allows(state, "coordination.k8s.io", "leases", "update") {
		t.Errorf("the runner's state role does not cover OpenTofu's kubernetes backend: %v", state)
	}
}
