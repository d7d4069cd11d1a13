// Package deploy ships the node half of gpuslice: the node plugin's Helm
// chart (helm/gpuslice-nodeplugin), the same objects as plain manifests
// (manifests/), and monitoring for it (monitoring/: a Grafana dashboard and
// Prometheus alerting rules). Render renders the chart with Helm's own
// engine: `helm install`, the plain manifests and gpuslice_platform's
// node_plugin block all deploy the same objects.
package deploy

import (
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// ChartName is the chart's name, and the release name Render uses.
const ChartName = "gpuslice-nodeplugin"

//go:embed all:helm/gpuslice-nodeplugin
var chartFiles embed.FS

// RenderManifests renders the chart with values over its defaults into
// namespace, as `helm template` does: one YAML document per template, in
// file-name order, each headed by its source.
func RenderManifests(namespace string, values map[string]any) (string, error) {
	chart, err := loadChart()
	if err != nil {
		return "", err
	}
	vals, err := renderValues(chart, namespace, values)
	if err != nil {
		return "", fmt.Errorf("node plugin chart values: %w", err)
	}
	out, err := engine.Render(chart, vals)
	if err != nil {
		return "", fmt.Errorf("render the node plugin's chart: %w", err)
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if !strings.HasSuffix(name, ".yaml") || strings.TrimSpace(out[name]) == "" {
			continue
		}
		b.WriteString("---\n# Source: " + name + "\n")
		b.WriteString(out[name])
	}
	return b.String(), nil
}

// loadChart loads the chart embedded in the binary.
func loadChart() (*chartv2.Chart, error) {
	var files []*archive.BufferedFile
	root := "helm/" + ChartName
	err := fs.WalkDir(chartFiles, root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := chartFiles.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, &archive.BufferedFile{Name: strings.TrimPrefix(path, root+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	chart, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load the node plugin's chart: %w", err)
	}
	return chart, nil
}

// Render renders the chart into typed objects, decoded strictly: a field
// the API does not know is an error.
func Render(namespace string, values map[string]any) ([]runtime.Object, error) {
	manifests, err := RenderManifests(namespace, values)
	if err != nil {
		return nil, err
	}
	return Decode(manifests)
}

// Decode reads YAML documents into typed objects, strictly.
func Decode(manifests string) ([]runtime.Object, error) {
	s := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Yaml: true, Strict: true})
	var out []runtime.Object
	for _, doc := range strings.Split(manifests, "\n---\n") {
		if strings.TrimSpace(strings.Join(nonComment(doc), "")) == "" {
			continue
		}
		obj, _, err := s.Decode([]byte(doc), nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decode:\n%s\n%w", doc, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

func nonComment(doc string) []string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") && l != "---" {
			out = append(out, l)
		}
	}
	return out
}

// DefaultValues are the chart's values.yaml.
func DefaultValues() (map[string]any, error) {
	data, err := chartFiles.ReadFile("helm/" + ChartName + "/values.yaml")
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("the node plugin chart's values.yaml: %w", err)
	}
	return v, nil
}
