package deploy

import (
	"reflect"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
)

// renderValues stands in for Helm's ToRenderValues (see why there): for
// the values gpuslice passes and for each rule of Helm's coalescing, both
// give the chart the same values.
func TestRenderValuesAreHelms(t *testing.T) {
	chart, err := loadChart()
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := DefaultValues()
	if err != nil {
		t.Fatal(err)
	}
	var aMap, aScalar string
	for k, v := range defaults {
		if _, ok := v.(map[string]any); ok && aMap == "" {
			aMap = k
		} else if !ok && v != nil && aScalar == "" {
			aScalar = k
		}
	}
	if aMap == "" || aScalar == "" {
		t.Fatalf("values.yaml has no map and scalar to test with: %v", defaults)
	}
	cases := map[string]map[string]any{
		"none":  nil,
		"empty": {},
		"what gpuslice_platform passes": {"image": map[string]any{"repository": "registry.test/gpuslice/gpuslice-nodeplugin",
			"digest": "sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5"}, "toolkitConfig": ""},
		"a new key, a list and a nested map": {"extra": []any{map[string]any{"a": nil}, "b"}, "deep": map[string]any{"x": map[string]any{"y": 1}}},
		"null removes a default":             {aScalar: nil, aMap: nil},
		"null inside a map":                  {aMap: map[string]any{"unknownKey": nil, "other": "v"}},
		"map over scalar, scalar over map":   {aScalar: map[string]any{"k": "v"}, aMap: "flat"},
	}
	for name, values := range cases {
		t.Run(name, func(t *testing.T) {
			ours, err := renderValues(chart, "gpuslice-system", values)
			if err != nil {
				t.Fatal(err)
			}
			helms, err := chartutil.ToRenderValues(chart, values, common.ReleaseOptions{Name: ChartName, Namespace: "gpuslice-system", IsInstall: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ours, helms) {
				t.Errorf("values differ from Helm's:\nours:  %#v\nhelm's: %#v", ours, helms)
			}
		})
	}
	// Nested nulls, against a chart whose defaults hold them.
	chart.Values = map[string]any{"m": map[string]any{"keep": 1, "gone": 2, "nil": nil, "inner": map[string]any{"z": nil, "y": 1}}, "top": nil}
	for name, values := range map[string]map[string]any{
		"nested null removes a default": {"m": map[string]any{"gone": nil}},
		"null over a null default":      {"m": map[string]any{"nil": nil}, "top": nil},
		"nulls among the defaults":      {},
	} {
		t.Run(name, func(t *testing.T) {
			ours, _ := renderValues(chart, "ns", values)
			helms, err := chartutil.ToRenderValues(chart, values, common.ReleaseOptions{Name: ChartName, Namespace: "ns", IsInstall: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ours["Values"], helms["Values"]) {
				t.Errorf("values differ from Helm's:\nours:  %#v\nhelm's: %#v", ours["Values"], helms["Values"])
			}
		})
	}
}
