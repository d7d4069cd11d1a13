package spec_test

import (
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// A quota makes its namespace a tenant, so it is refused on namespaces
// whose own components the tenant policies would refuse, and on names that
// cannot bind a role.
func TestQuotaNamespaceAndSubjects(t *testing.T) {
	models := tables.BuiltinGPUModels()
	pkg := &spec.Package{Meta: spec.Meta{Address: "gpuslice_package.p"}, Name: "p", GPUModel: "Tesla V100-PCIE-32GB", Fraction: 25}
	for _, tc := range []struct {
		namespace     string
		users, groups []string
		want          string // "" means valid
	}{
		{namespace: "team-a", users: []string{"alice"}, groups: []string{"team-a"}},
		{namespace: "gpuslice-system", want: `namespace: Platform namespace as tenant`},
		{namespace: "kube-system", want: `namespace: System namespace as tenant`},
		{namespace: "team-a", users: []string{"alice", "alice"}, want: `tenant_users[1]: Duplicate name`},
		{namespace: "team-a", groups: []string{" "}, want: `tenant_groups[0]: Empty name`},
	} {
		q := &spec.Quota{Meta: spec.Meta{Address: "gpuslice_quota.q"}, Namespace: tc.namespace, Slices: map[string]int64{"p": 1},
			TenantUsers: tc.users, TenantGroups: tc.groups}
		s := &spec.Stack{Name: "t", Platform: &spec.Platform{Meta: spec.Meta{Address: "gpuslice_platform.this"}, Namespace: "gpuslice-system",
			TenantLabel: "gpuslice.dev/tenant", Fractions: spec.DefaultFractions}, Packages: []*spec.Package{pkg}, Quotas: []*spec.Quota{q}}
		s.Resolve(models)
		diags := spec.Validate(s, models)
		switch {
		case tc.want == "" && diags.HasErrors():
			t.Errorf("%s %v %v: unexpected %v", tc.namespace, tc.users, tc.groups, diags.Err())
		case tc.want != "" && (!diags.HasErrors() || !strings.Contains(diags.Err().Error(), "gpuslice_quota.q."+tc.want)):
			t.Errorf("%s %v %v: want %q, got %v", tc.namespace, tc.users, tc.groups, tc.want, diags.Err())
		}
	}
}
