package nodes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// recording is a node plugin's /metrics scraped several times, kept as
// promtool's input series: each gauge's and counter's value at each scrape,
// labelled as a Prometheus scrape labels it (instance, job).
type recording struct {
	order   []string            // series, first seen first
	values  map[string][]string // by series, one per scrape; "" where absent
	names   map[string]bool     // every metric name served, histograms' included
	scrapes int
}

func newRecording() *recording {
	return &recording{values: map[string][]string{}, names: map[string]bool{}}
}

// add records one scrape of the plugin at instance.
func (r *recording) add(t *testing.T, text, instance string) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the node plugin's /metrics: %v", err)
	}
	for name, f := range families {
		r.names[name] = true
		for _, m := range f.Metric {
			var v float64
			switch {
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Untyped != nil:
				v = m.Untyped.GetValue()
			default: // histograms: no rule reads them
				r.names[name+"_bucket"], r.names[name+"_sum"], r.names[name+"_count"] = true, true, true
				continue
			}
			s := seriesOf(name, m.Label, instance)
			if _, ok := r.values[s]; !ok {
				r.order = append(r.order, s)
				r.values[s] = make([]string, r.scrapes)
			}
			r.values[s] = append(r.values[s], strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	r.scrapes++
	for s, vs := range r.values {
		if len(vs) < r.scrapes {
			r.values[s] = append(vs, "")
		}
	}
}

// seriesOf is a series in promtool's notation, its labels sorted.
func seriesOf(name string, labels []*dto.LabelPair, instance string) string {
	pairs := []string{"instance=" + strconv.Quote(instance), "job=" + strconv.Quote("gpuslice-nodeplugin")}
	for _, l := range labels {
		pairs = append(pairs, l.GetName()+"="+strconv.Quote(l.GetValue()))
	}
	slices.Sort(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// inputSeries are the recorded series, one scrape per promtool interval:
// '_' before a series first appears, 'stale' once it has gone.
func (r *recording) inputSeries() []inputSeries {
	out := make([]inputSeries, 0, len(r.order))
	for _, s := range r.order {
		vs := slices.Clone(r.values[s])
		seen := false
		for i, v := range vs {
			switch {
			case v != "":
				seen = true
			case seen:
				vs[i] = "stale"
			default:
				vs[i] = "_"
			}
		}
		out = append(out, inputSeries{Series: s, Values: strings.Join(vs, " ")})
	}
	return out
}

// promtool's unit-test format (promtool test rules).
type (
	ruleTestFile struct {
		RuleFiles          []string   `json:"rule_files"`
		EvaluationInterval string     `json:"evaluation_interval"`
		Tests              []ruleTest `json:"tests"`
	}
	ruleTest struct {
		Name        string        `json:"name"`
		Interval    string        `json:"interval"`
		InputSeries []inputSeries `json:"input_series"`
		ExprTests   []exprTest    `json:"promql_expr_test"`
	}
	inputSeries struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	exprTest struct {
		Expr       string      `json:"expr"`
		EvalTime   string      `json:"eval_time"`
		ExpSamples []expSample `json:"exp_samples"`
	}
	expSample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
)

// firing expects exactly these alerts firing at evalTime: the ALERTS
// series the rule evaluator writes, so an alert not listed fails it too.
func firing(evalTime string, alerts ...map[string]string) exprTest {
	tc := exprTest{Expr: `ALERTS{alertstate="firing"}`, EvalTime: evalTime, ExpSamples: []expSample{}}
	for _, a := range alerts {
		pairs := []string{`alertstate="firing"`}
		for k, v := range a {
			pairs = append(pairs, k+"="+strconv.Quote(v))
		}
		slices.Sort(pairs)
		tc.ExpSamples = append(tc.ExpSamples, expSample{Labels: "ALERTS{" + strings.Join(pairs, ",") + "}", Value: 1})
	}
	return tc
}

// shippedRules is the alert rule file the project ships.
func shippedRules(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "deploy", "monitoring", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// runRuleTests runs promtool's rule evaluator on the tests, with the
// shipped rules; the test file is logged when it fails.
func runRuleTests(t *testing.T, interval string, tests ...ruleTest) {
	t.Helper()
	promtool, err := cluster.ToolPath(cluster.FindBinDir(), "promtool")
	if err != nil {
		testenv.Unavailable(t, "%v (tools/build.sh promtool)", err)
	}
	data, err := yaml.Marshal(ruleTestFile{RuleFiles: []string{shippedRules(t)}, EvaluationInterval: interval, Tests: tests})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "recorded_test.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("%s test rules: %v\n%s\nthe tests, from series recorded on the real node:\n%s", promtool, err, out, data)
	}
}

var ruleMetricRE = regexp.MustCompile(`\b(gpuslice_[a-z_]+|DCGM_[A-Z_]+)\b`)

// ruleMetrics are the metric names the shipped rules' expressions read.
func ruleMetrics(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(shippedRules(t))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, name := range ruleMetricRE.FindAllString(r.Expr, -1) {
				if !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the shipped rules read no gpuslice or DCGM metric: cannot check them")
	}
	return out
}

func (r *recording) String() string {
	return fmt.Sprintf("%d series over %d scrapes", len(r.order), r.scrapes)
}
