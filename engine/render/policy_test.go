package render_test

import (
	"testing"

	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

func kinds(t *testing.T, s *spec.Stack) map[string][]string {
	t.Helper()
	objs, err := render.Stack(s)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, o := range objs {
		out[o.MustUnstructured().GetKind()] = append(out[o.MustUnstructured().GetKind()], o.MustUnstructured().GetNamespace()+"/"+o.MustUnstructured().GetName())
	}
	return out
}

// The tenant role is always rendered; the policies only with
// admission_policies = true; a quota binds the role only to the users and
// groups it names.
func TestPlatformPoliciesAndTenantRBAC(t *testing.T) {
	platform := &spec.Platform{Meta: spec.Meta{Address: "gpuslice_platform.this"}, Namespace: "gpuslice-system", TenantLabel: "gpuslice.dev/tenant", Fractions: spec.DefaultFractions, AdmissionPolicies: true}
	quota := &spec.Quota{Meta: spec.Meta{Address: "gpuslice_quota.a"}, Namespace: "team-a", Slices: map[string]int64{"p": 1}}
	s := &spec.Stack{Name: "t", Platform: platform, Quotas: []*spec.Quota{quota}}

	got := kinds(t, s)
	if n := len(render.PolicyNames); len(got["ValidatingAdmissionPolicy"]) != n || len(got["ValidatingAdmissionPolicyBinding"]) != n {
		t.Errorf("want %d policies and as many bindings, got %v and %v", len(render.PolicyNames), got["ValidatingAdmissionPolicy"], got["ValidatingAdmissionPolicyBinding"])
	}
	if len(got["ClusterRole"]) != 1 || got["ClusterRole"][0] != "/"+render.TenantRole {
		t.Errorf("tenant ClusterRole: %v", got["ClusterRole"])
	}
	if len(got["RoleBinding"]) != 0 {
		t.Errorf("a quota naming nobody rendered %v", got["RoleBinding"])
	}

	platform.AdmissionPolicies = false
	quota.TenantGroups = []string{"team-a"}
	got = kinds(t, s)
	if len(got["ValidatingAdmissionPolicy"])+len(got["ValidatingAdmissionPolicyBinding"]) != 0 {
		t.Errorf("admission_policies = false still rendered %v %v", got["ValidatingAdmissionPolicy"], got["ValidatingAdmissionPolicyBinding"])
	}
	if len(got["ClusterRole"]) != 1 || len(got["RoleBinding"]) != 1 || got["RoleBinding"][0] != "team-a/"+render.TenantRole {
		t.Errorf("role and binding: %v %v", got["ClusterRole"], got["RoleBinding"])
	}
}
