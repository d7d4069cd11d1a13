package deploy_test

import (
	"os"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/deploy"
	enginerender "github.com/gpuslice/gpuslice/engine/render"
)

// runnerRulesFile holds the runner's rules as the chart includes them,
// generated from enginerender.RunnerRules and RunnerStateRules.
const runnerRulesFile = chartDir + "/templates/_runner_rules.tpl"

var runnerValues = map[string]any{"runner": map[string]any{"enabled": true}}

// runnerRulesTemplate is runnerRulesFile as generated from the engine's
// rules: one source for what a runner may do, in Go and in the chart.
func runnerRulesTemplate(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("{{- /*\nGenerated from engine/render/runner_rbac.go (RunnerRules, RunnerStateRules):\n" +
		"the runner's rules have one source. Do not edit; regenerate:\n" +
		"go test ./deploy -run TestChartRunnerRules -update\n*/ -}}\n")
	for _, d := range []struct {
		name  string
		rules []rbacv1.PolicyRule
	}{
		{"gpuslice.runnerRules", enginerender.RunnerRules()},
		{"gpuslice.runnerStateRules", enginerender.RunnerStateRules()},
	} {
		data, err := yaml.Marshal(d.rules)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("{{- define \"" + d.name + "\" -}}\n" + string(data) + "{{- end }}\n")
	}
	return b.String()
}

// The chart's runner role and bindings are the platform's runner block's
// (enginerender.RunnerRBAC): the same names, subjects and rules, from
// rules generated out of the engine's.
func TestChartRunnerRules(t *testing.T) {
	want := runnerRulesTemplate(t)
	if *update {
		if err := os.WriteFile(runnerRulesFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(runnerRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != want {
		t.Fatalf("%s differs from engine/render's RunnerRules: run go test ./deploy -run TestChartRunnerRules -update", runnerRulesFile)
	}

	role, binding, state, stateBinding := enginerender.RunnerRBAC("flux-system", "tf-runner")
	got := runnerObjects(t, runnerValues)
	if len(got) != 4 {
		t.Fatalf("runner.enabled rendered %d runner objects, want a ClusterRole, a ClusterRoleBinding, a Role and a RoleBinding: %v", len(got), got)
	}
	for _, o := range got {
		switch v := o.(type) {
		case *rbacv1.ClusterRole:
			sameRole(t, v.Name, v.Namespace, v.Rules, role.Name, role.Namespace, role.Rules)
		case *rbacv1.Role:
			sameRole(t, v.Name, v.Namespace, v.Rules, state.Name, state.Namespace, state.Rules)
		case *rbacv1.ClusterRoleBinding:
			sameBinding(t, v.Name, v.Namespace, v.RoleRef, v.Subjects, binding.Name, binding.Namespace, binding.RoleRef, binding.Subjects)
		case *rbacv1.RoleBinding:
			sameBinding(t, v.Name, v.Namespace, v.RoleRef, v.Subjects, stateBinding.Name, stateBinding.Namespace, stateBinding.RoleRef, stateBinding.Subjects)
		}
	}

	// The reconciler's role comes with it; nothing without either, or when
	// the platform installs the role.
	for _, c := range []struct {
		name   string
		values map[string]any
		want   int
	}{
		{"reconcile.enabled", reconcileValues, 1},
		{"defaults", nil, 0},
		{"runner.createClusterRole=false", map[string]any{"runner": map[string]any{"createClusterRole": false}, "reconcile": reconcileValues["reconcile"]}, 0},
	} {
		if got := runnerObjects(t, c.values); len(got) != c.want {
			t.Errorf("%s: %d runner objects, want %d: %v", c.name, len(got), c.want, got)
		}
	}
}

// runnerObjects are the chart's objects labelled as the runner's.
func runnerObjects(t *testing.T, values map[string]any) []runtime.Object {
	t.Helper()
	objs, err := deploy.Render(namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, o := range objs {
		if m, ok := o.(interface{ GetLabels() map[string]string }); ok && m.GetLabels()["app.kubernetes.io/name"] == contract.RunnerRole {
			out = append(out, o)
		}
	}
	return out
}

func sameRole(t *testing.T, name, ns string, rules []rbacv1.PolicyRule, wantName, wantNS string, wantRules []rbacv1.PolicyRule) {
	t.Helper()
	if name != wantName || ns != wantNS || !equality.Semantic.DeepEqual(rules, wantRules) {
		t.Errorf("chart's role %s/%s with rules %+v, want the platform's %s/%s with %+v", ns, name, rules, wantNS, wantName, wantRules)
	}
}

func sameBinding(t *testing.T, name, ns string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, wantName, wantNS string, wantRef rbacv1.RoleRef, wantSubjects []rbacv1.Subject) {
	t.Helper()
	if name != wantName || ns != wantNS || ref != wantRef || !equality.Semantic.DeepEqual(subjects, wantSubjects) {
		t.Errorf("chart's binding %s/%s of %+v to %+v, want the platform's %s/%s of %+v to %+v", ns, name, ref, subjects, wantNS, wantName, wantRef, wantSubjects)
	}
}
