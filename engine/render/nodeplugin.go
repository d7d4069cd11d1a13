package render

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/deploy"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// NodePluginDaemonSet names the node plugin's DaemonSet in the platform
// namespace.
const NodePluginDaemonSet = deploy.ChartName

// chart renders the platform's node_plugin and reconcile blocks through
// the node plugin's Helm chart, so the platform installs exactly what
// `helm install` and the plain manifests do, with the platform's
// fractions. Without a node_plugin block only the reconciler's objects are
// kept.
func (r renderer) chart(p *spec.Platform) ([]objects.Object, error) {
	values := map[string]any{}
	if p.NodePlugin != nil {
		values = NodePluginValues(p)
	}
	if p.Reconcile != nil {
		values["reconcile"] = ReconcileValues(p.Reconcile)
	}
	// The platform renders the runner's role itself (runnerRBAC), owned by
	// the platform with the runner's bindings.
	values["runner"] = map[string]any{"createClusterRole": false}
	typed, err := deploy.Render(p.Namespace, values)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Address, err)
	}
	var out []objects.Object
	for _, t := range typed {
		accessor, ok := t.(metav1.Object)
		if !ok {
			return nil, fmt.Errorf("%s: the chart rendered a %T without metadata", p.Address, t)
		}
		if p.NodePlugin == nil && accessor.GetLabels()[nameLabel] != ReconcileName {
			continue
		}
		meta := r.meta(p.Address, accessor.GetNamespace(), accessor.GetName(), accessor.GetLabels())
		accessor.SetLabels(meta.Labels)
		annotations := accessor.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		maps.Copy(annotations, meta.Annotations)
		accessor.SetAnnotations(annotations)
		gvk := t.GetObjectKind().GroupVersionKind()
		o := object(p.Address, t, gvk.GroupVersion().String(), gvk.Kind)
		out = append(out, o)
	}
	return out, nil
}

// NodePluginValues are the chart values of a node_plugin block.
func NodePluginValues(p *spec.Platform) map[string]any {
	np := p.NodePlugin
	repo, tag, digest := SplitImage(np.Image)
	fractions := make([]string, len(p.Fractions))
	for i, f := range p.Fractions {
		fractions[i] = strconv.Itoa(f)
	}
	values := map[string]any{
		"image":         map[string]any{"repository": repo, "tag": tag, "digest": digest, "pullPolicy": np.ImagePullPolicy},
		"fractions":     strings.Join(fractions, ","),
		"driverRoot":    np.DriverRoot,
		"toolkitConfig": np.ToolkitConfig,
		"simulatedGPUs": np.SimulatedGPUs,
		"nodeSelector":  replacing("nodeSelector", np.NodeSelector),
		"env":           stringMap(np.Env),
	}
	// Left out, the plugin's default; set, only then a flag (an image older
	// than the flag is not handed one it does not know).
	for key, on := range map[string]*bool{"anySize": p.AnySize, "timeSlicing": p.TimeSlicing} {
		if on != nil {
			values[key] = strconv.FormatBool(*on)
		}
	}
	for key, d := range map[string]string{"healthRecovery": np.HealthRecovery, "healthEvictAfter": np.HealthEvictAfter} {
		if d != "" {
			values[key] = d
		}
	}
	if len(np.Tolerations) > 0 {
		var tolerations []any
		for _, t := range np.Tolerations {
			m := map[string]any{"operator": t.Operator}
			for k, v := range map[string]string{"key": t.Key, "value": t.Value, "effect": t.Effect} {
				if v != "" {
					m[k] = v
				}
			}
			tolerations = append(tolerations, m)
		}
		values["tolerations"] = tolerations
	}
	return values
}

// replacing makes m replace the chart's default map values.name: Helm
// merges maps, and drops a key only when it is set to null.
func replacing(name string, m map[string]string) map[string]any {
	out := stringMap(m)
	defaults, err := deploy.DefaultValues()
	if err != nil {
		return out // the chart's own defaults are embedded; rendering reports a broken chart
	}
	if d, ok := defaults[name].(map[string]any); ok {
		for k := range d {
			if _, set := m[k]; !set {
				out[k] = nil
			}
		}
	}
	return out
}

func stringMap(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// SplitImage splits an image reference into repository, tag and digest
// (either may be empty).
func SplitImage(image string) (repo, tag, digest string) {
	repo, digest, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}

// hostPrefix is where the chart mounts host files the plugin only reads.
const hostPrefix = "/host"

// NodePluginOf reads a node_plugin block back from the DaemonSet the
// platform rendered.
func NodePluginOf(ds *appsv1.DaemonSet) (*spec.NodePlugin, error) {
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) == 0 {
		return nil, fmt.Errorf("DaemonSet %s/%s has no container", ds.Namespace, ds.Name)
	}
	c := pod.Containers[0]
	np := &spec.NodePlugin{Image: c.Image, ImagePullPolicy: string(c.ImagePullPolicy), NodeSelector: pod.NodeSelector}
	for _, a := range c.Args {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "--driver-root":
			np.DriverRoot = value
		case "--simulate":
			np.SimulatedGPUs = value
		case "--toolkit-config":
			np.ToolkitConfig = strings.TrimPrefix(value, hostPrefix)
		case "--health-recovery":
			np.HealthRecovery = value
		case "--health-evict-after":
			np.HealthEvictAfter = value
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil || e.Name == "NODE_NAME" || e.Name == "NODE_IP" {
			continue // the chart's own
		}
		if np.Env == nil {
			np.Env = map[string]string{}
		}
		np.Env[e.Name] = e.Value
	}
	for _, t := range pod.Tolerations {
		np.Tolerations = append(np.Tolerations, spec.Toleration{Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: string(t.Effect)})
	}
	return np, nil
}

// DefaultTolerations reports whether ts are the chart's default
// tolerations.
func DefaultTolerations(ts []spec.Toleration) bool {
	defaults, err := deploy.DefaultValues()
	if err != nil {
		return false
	}
	list, _ := defaults["tolerations"].([]any)
	if len(list) != len(ts) {
		return false
	}
	for i, d := range list {
		m, _ := d.(map[string]any)
		str := func(k string) string { s, _ := m[k].(string); return s }
		t := ts[i]
		if t.Key != str("key") || t.Operator != str("operator") || t.Value != str("value") || t.Effect != str("effect") {
			return false
		}
	}
	return true
}
