package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/nodeplugin/enforce"
	"github.com/gpuslice/gpuslice/nodeplugin/metrics"
)

// collectors records what the plugin registers, as the plugin does at start.
type collectors struct{ list []prometheus.Collector }

func (c *collectors) Register(x prometheus.Collector) error { c.list = append(c.list, x); return nil }
func (c *collectors) MustRegister(xs ...prometheus.Collector) {
	c.list = append(c.list, xs...)
}
func (c *collectors) Unregister(prometheus.Collector) bool { return false }

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// served maps each metric the node plugin serves to its labels.
func served(t *testing.T) map[string][]string {
	t.Helper()
	var reg collectors
	metrics.NewPlugin(&reg)
	enforce.New(enforce.Config{Registerer: &reg})
	reg.MustRegister(metrics.ClaimCollector{}, metrics.GPUCollector{}, metrics.ProcessCollector{}, metrics.HealthCollector{}, metrics.StrandedCollector{})
	out := map[string][]string{}
	for _, c := range reg.list {
		ch := make(chan *prometheus.Desc, 64)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := descRE.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			var labels []string
			for _, l := range strings.Split(m[2], ",") {
				if l = strings.TrimSpace(l); l != "" {
					labels = append(labels, l)
				}
			}
			out[m[1]] = labels
		}
	}
	return out
}

var (
	metricRE = regexp.MustCompile(`\b(gpuslice_[a-z_]+|DCGM_[A-Z_]+)\b`)
	byRE     = regexp.MustCompile(`by \(([^)]*)\)`)
	matchRE  = regexp.MustCompile(`\{([^}]*)\}`)
)

// checkExpr fails t unless every metric in expr is served and every label
// it groups or filters by is one of theirs (or Prometheus' own).
func checkExpr(t *testing.T, where, expr string, served map[string][]string) {
	t.Helper()
	for _, p := range problems(where, expr, served) {
		t.Error(p)
	}
}

func problems(where, expr string, served map[string][]string) []string {
	var out []string
	labels := map[string]bool{"le": true, "instance": true, "job": true}
	found := false
	for _, name := range metricRE.FindAllString(expr, -1) {
		found = true
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok {
				if _, histogram := served[b]; histogram {
					base = b
				}
			}
		}
		ls, ok := served[base]
		if !ok {
			out = append(out, fmt.Sprintf("%s uses %s, which the node plugin does not serve", where, name))
			continue
		}
		for _, l := range ls {
			labels[l] = true
		}
	}
	if !found {
		out = append(out, fmt.Sprintf("%s: %q uses no gpuslice or DCGM metric", where, expr))
	}
	var used []string
	for _, m := range byRE.FindAllStringSubmatch(expr, -1) {
		used = append(used, strings.Split(m[1], ",")...)
	}
	for _, m := range matchRE.FindAllStringSubmatch(expr, -1) {
		for _, kv := range strings.Split(m[1], ",") {
			name, _, _ := strings.Cut(kv, "=")
			used = append(used, strings.TrimSuffix(name, "!"))
		}
	}
	for _, l := range used {
		if l = strings.TrimSpace(l); l != "" && !labels[l] {
			out = append(out, fmt.Sprintf("%s groups or filters by label %q, which its metrics do not carry", where, l))
		}
	}
	return out
}

// The check itself catches a misspelt metric and a label the metric lacks.
func TestExprCheckCatchesMistakes(t *testing.T) {
	s := served(t)
	if p := problems("x", `sum(gpuslice_claim_memory_usage_bytes)`, s); len(p) != 1 {
		t.Errorf("misspelt metric: %v", p)
	}
	if p := problems("x", `sum by (pod) (gpuslice_claim_memory_used_bytes)`, s); len(p) != 1 {
		t.Errorf("label the metric lacks: %v", p)
	}
	if p := problems("x", `histogram_quantile(0.99, sum by (le) (rate(gpuslice_prepare_duration_seconds_bucket[5m])))`, s); len(p) != 0 {
		t.Errorf("a histogram's buckets: %v", p)
	}
}

// The Grafana dashboard shipped with the plugin queries only what the
// plugin serves, with the labels it serves them with.
func TestDashboardUsesServedMetrics(t *testing.T) {
	s := served(t)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name, Query string
			} `json:"list"`
		} `json:"templating"`
	}
	data, err := os.ReadFile("monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkExpr(t, "panel "+p.Title, q.Expr, s)
		}
	}
	for _, v := range dash.Templating.List {
		if strings.HasPrefix(v.Query, "label_values(") {
			checkExpr(t, "variable "+v.Name, strings.ReplaceAll(strings.TrimPrefix(v.Query, "label_values("), ", ", " by ("), s)
		}
	}
	// What the issue asks the dashboard to show.
	for _, want := range []string{"gpuslice_claim_memory_used_bytes", "gpuslice_claim_memory_limit_bytes", "gpuslice_claim_memory_high_water_bytes",
		"gpuslice_claim_denied_allocations_total", "gpuslice_claim_throttled_seconds_total", "gpuslice_gpu_unattributed_memory_bytes", "DCGM_FI_DEV_GPU_UTIL",
		"gpuslice_gpu_unhealthy", "gpuslice_claim_enforcer_kills_total", "gpuslice_claim_over_limit", "gpuslice_claim_gpu_busy_seconds_total", "gpuslice_claim_nvml_memory_used_bytes"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("dashboard does not show %s", want)
		}
	}
}

// The alerting rules fire on what the plugin serves, and each says what
// happened and what to do.
func TestAlertsUseServedMetrics(t *testing.T) {
	s := served(t)
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	data, err := os.ReadFile("monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			checkExpr(t, "alert "+r.Alert, r.Expr, s)
			if !slices.Contains([]string{"warning", "critical"}, r.Labels["severity"]) {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a summary or description", r.Alert)
			}
		}
	}
	for _, want := range []string{"GPUSliceClaimOverLimit", "GPUSliceUnattributedGPUMemory", "GPUSlicePrepareErrors", "GPUSliceNodeOpenToImageGPUSelection",
		"GPUSliceGPUUnhealthy", "GPUSliceEnforcerStoppedProcess", "GPUSliceClaimAtMemoryLimit", "GPUSliceClaimIdle", "GPUSliceClaimUnderused",
		"GPUSliceTimeSlicedGPUSaturated", "GPUSliceTimeSlicedGPUMemoryFull"} {
		if !slices.Contains(names, want) {
			t.Errorf("no alert %s", want)
		}
	}
}
