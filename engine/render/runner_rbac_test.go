package render

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
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

// The platform's runner block renders the roles and binds both to the
// runner's ServiceAccount, the state Role in the runner's namespace.
func TestPlatformBindsTheRunner(t *testing.T) {
	p := &spec.Platform{Meta: spec.Meta{Address: "gpuslice_platform.p"}, Namespace: "gs", TenantLabel: "t", Fractions: []int{100},
		Runner: &spec.Runner{Namespace: "ci", ServiceAccount: "atlantis"}}
	objs, err := Stack(&spec.Stack{Name: "s", Platform: p})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, o := range objs {
		if o.MustUnstructured().GetAPIVersion() == "rbac.authorization.k8s.io/v1" {
			subjects, _, _ := unstructured.NestedSlice(o.MustUnstructured().Object, "subjects")
			found[o.MustUnstructured().GetKind()+" "+o.MustUnstructured().GetNamespace()+"/"+o.MustUnstructured().GetName()] = fmt.Sprint(subjects)
		}
	}
	subject := "[map[kind:ServiceAccount name:atlantis namespace:ci]]"
	for _, want := range []string{
		"ClusterRole /" + contract.RunnerRole, "Role ci/" + contract.RunnerStateRole,
		"ClusterRoleBinding /" + contract.RunnerRole + "-ci-atlantis", "RoleBinding ci/" + contract.RunnerStateRole + "-atlantis",
	} {
		got, ok := found[want]
		if !ok {
			t.Errorf("no %s among %v", want, found)
		} else if strings.Contains(want, "Binding") && got != subject {
			t.Errorf("%s binds %s, want %s", want, got, subject)
		}
	}
}

// A reconcile block alone renders the runner's ClusterRole its reconciler
// is bound to (and no runner bindings): without it the in-cluster
// reconciler would have no rights.
func TestReconcileGetsTheRunnerRole(t *testing.T) {
	p := &spec.Platform{Meta: spec.Meta{Address: "gpuslice_platform.p"}, Namespace: "gs", TenantLabel: "t", Fractions: []int{100},
		Reconcile: &spec.Reconcile{GitURL: "https://git.test/stacks.git", Ref: "main", Path: ".", Stack: "prod", Interval: "30s",
			Image: "registry.test/gpuslice/gpuslice-reconcile:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5"}}
	objs, err := Stack(&spec.Stack{Name: "s", Platform: p})
	if err != nil {
		t.Fatal(err)
	}
	var role bool
	for _, o := range objs {
		switch {
		case o.MustUnstructured().GetKind() == "ClusterRole" && o.MustUnstructured().GetName() == contract.RunnerRole:
			role = true
		case strings.HasPrefix(o.MustUnstructured().GetName(), contract.RunnerRole+"-") || strings.HasPrefix(o.MustUnstructured().GetName(), contract.RunnerStateRole):
			t.Errorf("a reconcile block without a runner block renders %s %s", o.MustUnstructured().GetKind(), o.MustUnstructured().GetName())
		}
	}
	if !role {
		t.Errorf("no ClusterRole %s for the reconciler to be bound to", contract.RunnerRole)
	}
}

// The platform renders the runner's role once, its own (owned by the
// platform, as its runner bindings are), never also the chart's: with
// node_plugin, reconcile and runner blocks there is one ClusterRole
// gpuslice-runner and one of each binding.
func TestPlatformRendersTheRunnerRoleOnce(t *testing.T) {
	p := &spec.Platform{Meta: spec.Meta{Address: "gpuslice_platform.p"}, Namespace: "gs", TenantLabel: "t", Fractions: []int{100},
		NodePlugin: &spec.NodePlugin{Image: "registry.test/gpuslice/gpuslice-nodeplugin:0.1.0"},
		Runner:     &spec.Runner{Namespace: "flux-system", ServiceAccount: "tf-runner"},
		Reconcile: &spec.Reconcile{GitURL: "https://git.test/stacks.git", Ref: "main", Path: ".", Stack: "prod", Interval: "30s",
			Image: "registry.test/gpuslice/gpuslice-reconcile:0.1.0"}}
	objs, err := Stack(&spec.Stack{Name: "s", Platform: p})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, o := range objs {
		key := o.MustUnstructured().GetKind() + " " + o.MustUnstructured().GetNamespace() + "/" + o.MustUnstructured().GetName()
		if seen[key]++; seen[key] > 1 {
			t.Errorf("%s rendered twice", key)
		}
	}
	if seen["ClusterRole /"+contract.RunnerRole] != 1 {
		t.Errorf("no ClusterRole %s", contract.RunnerRole)
	}
}
