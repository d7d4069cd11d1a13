package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

const alertTests = "monitoring/tests/alerts_test.yaml"

// ruleTests is what these tests read of promtool's unit-test format.
type ruleTests struct {
	Tests []struct {
		Name        string `json:"name"`
		InputSeries []struct {
			Series string `json:"series"`
		} `json:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			AlertName string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readRuleTests(t *testing.T) ruleTests {
	t.Helper()
	data, err := os.ReadFile(alertTests)
	if err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(data, &rt); err != nil {
		t.Fatalf("%s: %v", alertTests, err)
	}
	return rt
}

// Prometheus' own rule evaluator runs the rules against the test series:
// every case's alerts, labels and rendered annotations must be as written.
func TestAlertRules(t *testing.T) {
	promtool, err := cluster.ToolPath(cluster.FindBinDir(), "promtool")
	if err != nil {
		testenv.Unavailable(t, "%v (tools/build.sh promtool)", err)
	}
	out, err := exec.Command(promtool, "test", "rules", alertTests).CombinedOutput()
	if err != nil {
		t.Fatalf("%s test rules %s: %v\n%s", promtool, alertTests, err, out)
	}
}

// Every alert in alerts.yaml has a case that fires it and one that does not.
func TestEveryAlertFiresAndStaysQuiet(t *testing.T) {
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range readRuleTests(t).Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	data, err := os.ReadFile("monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] {
				t.Errorf("alert %s: no case in %s fires it", r.Alert, alertTests)
			}
			if !quiet[r.Alert] {
				t.Errorf("alert %s: no case in %s expects it quiet", r.Alert, alertTests)
			}
		}
	}
}

var seriesRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}$`)

// The test series are shaped as the node plugin serves them: each name is
// served, with exactly its labels and the two a scrape adds.
func TestAlertTestSeriesAreServed(t *testing.T) {
	s := served(t)
	for _, tc := range readRuleTests(t).Tests {
		for _, in := range tc.InputSeries {
			m := seriesRE.FindStringSubmatch(in.Series)
			if m == nil {
				t.Errorf("test %q: cannot read series %s", tc.Name, in.Series)
				continue
			}
			want, ok := s[m[1]]
			if !ok {
				t.Errorf("test %q: %s is not served by the node plugin", tc.Name, m[1])
				continue
			}
			want = append(slices.Clone(want), "instance", "job")
			var got []string
			for _, kv := range strings.Split(m[2], `",`) {
				name, _, _ := strings.Cut(kv, "=")
				got = append(got, strings.TrimSpace(name))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("test %q: %s has labels %v, the plugin serves it with %v (plus instance, job)", tc.Name, m[1], got, want)
			}
		}
	}
}

// Prometheus parses every query of the dashboard (with its variables set to
// match all): promtool checks them as the expressions of recording rules.
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := cluster.ToolPath(cluster.FindBinDir(), "promtool")
	if err != nil {
		testenv.Unavailable(t, "%v (tools/build.sh promtool)", err)
	}
	data, err := os.ReadFile("monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := yaml.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, p := range dash.Panels {
		for j, q := range p.Targets {
			expr := strings.NewReplacer("$namespace", ".*", "$node", ".*").Replace(q.Expr)
			rules = append(rules, rule{Record: fmt.Sprintf("panel_%d_query_%d", i, j), Expr: expr})
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(promtool, "check", "rules", "--lint=none", file).CombinedOutput(); err != nil {
		t.Fatalf("the dashboard's queries: %v\n%s", err, msg)
	}
}
