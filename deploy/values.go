package deploy

import (
	helmchart "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// renderValues is what Helm's chartutil.ToRenderValues gives a chart
// installed as release ChartName into namespace: the release, the chart's
// metadata, the default capabilities and the values over the chart's
// defaults.
//
// It is not chartutil's own because that package compiles JSON
// meta-schemas when the program starts (about 17 ms), and Terraform starts
// the provider three times per plan; our chart has no values schema, no
// subcharts and no globals, so what remains of Helm's coalescing is
// coalesce below. TestRenderValuesAreHelms holds the two equal.
func renderValues(chart *chartv2.Chart, namespace string, values map[string]any) (common.Values, error) {
	accessor, err := helmchart.NewAccessor(chart)
	if err != nil {
		return nil, err
	}
	return common.Values{
		"Chart":        accessor.MetadataAsMap(),
		"Capabilities": common.DefaultCapabilities,
		"Release": map[string]any{
			"Name": ChartName, "Namespace": namespace, "IsUpgrade": false, "IsInstall": true, "Revision": 0, "Service": "Helm",
		},
		"Values": common.Values(coalesce(values, chart.Values, true)),
	}, nil
}

// coalesce returns values over defaults as Helm coalesces them: maps
// merge, anything else in values replaces the default, and a null in
// values removes a default (at the top level, any key it names); nulls
// among the defaults are dropped. Neither argument is changed.
func coalesce(values, defaults map[string]any, top bool) map[string]any {
	out := copyValues(values, true)
	for k, d := range defaults {
		v, set := out[k]
		switch {
		case !set:
			if d != nil {
				out[k] = copyValue(d, false)
			}
		case v == nil:
			if top || d != nil {
				delete(out, k)
			}
		default:
			vm, ok := v.(map[string]any)
			dm, isMap := d.(map[string]any)
			if ok && isMap {
				out[k] = coalesce(vm, dm, false)
			}
		}
	}
	return out
}

// copyValues copies m deeply, with or without its nulls.
func copyValues(m map[string]any, nulls bool) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if v != nil || nulls {
			out[k] = copyValue(v, nulls)
		}
	}
	return out
}

func copyValue(v any, nulls bool) any {
	switch v := v.(type) {
	case map[string]any:
		return copyValues(v, nulls)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyValue(e, true)
		}
		return out
	}
	return v
}
