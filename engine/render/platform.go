package render

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// PlatformConfigMap names the ConfigMap recording the platform's settings
// in the platform namespace, where node plugins and operators read them.
const PlatformConfigMap = "gpuslice-platform"

func (r renderer) platform(p *spec.Platform) ([]objects.Object, error) {
	ns := object(p.Address, &corev1.Namespace{ObjectMeta: r.meta(p.Address, "", p.Namespace, nil)}, "v1", "Namespace")
	fractions := make([]string, len(p.Fractions))
	for i, f := range p.Fractions {
		fractions[i] = strconv.Itoa(f)
	}
	data := map[string]string{
		"fractions":         strings.Join(fractions, ","),
		"tenantLabel":       p.TenantLabel,
		"admissionPolicies": strconv.FormatBool(p.AdmissionPolicies),
		"schedulerUsers":    strings.Join(p.SchedulerUsersOrDefault(), ","),
	}
	if p.ForceDestroy {
		data["forceDestroy"] = "true"
	}
	if p.Runner != nil {
		data["runner"] = p.Runner.Namespace + "/" + p.Runner.ServiceAccount
	}
	// only when set: a platform that leaves them to the node plugin keeps
	// the ConfigMap it had before they existed
	for key, on := range map[string]*bool{"anySize": p.AnySize, "timeSlicing": p.TimeSlicing} {
		if on != nil {
			data[key] = strconv.FormatBool(*on)
		}
	}
	cm := object(p.Address, &corev1.ConfigMap{ObjectMeta: r.meta(p.Address, p.Namespace, PlatformConfigMap, nil), Data: data}, "v1", "ConfigMap")
	role := r.tenantClusterRole(p)
	out := []objects.Object{ns, cm, role}
	if p.Runner != nil || p.Reconcile != nil {
		runner, err := r.runnerRBAC(p)
		if err != nil {
			return nil, err
		}
		out = append(out, runner...)
	}
	if p.NodePlugin != nil || p.Reconcile != nil {
		plugin, err := r.chart(p)
		if err != nil {
			return nil, err
		}
		out = append(out, plugin...)
	}
	if p.AdmissionPolicies {
		policies, err := r.policies(p)
		if err != nil {
			return nil, err
		}
		out = append(out, policies...)
	}
	return out, nil
}

// PlatformOf reads the platform's settings back from the ConfigMap platform
// rendered. A fraction that is not a number is an error naming the
// ConfigMap and the value: dropping it would plan packages against
// fractions the node plugins may not offer.
func PlatformOf(cm *corev1.ConfigMap) (*spec.Platform, error) {
	p := &spec.Platform{Namespace: cm.Namespace, TenantLabel: cm.Data["tenantLabel"], AdmissionPolicies: cm.Data["admissionPolicies"] == "true",
		ForceDestroy: cm.Data["forceDestroy"] == "true"}
	for key, to := range map[string]**bool{"anySize": &p.AnySize, "timeSlicing": &p.TimeSlicing} {
		if v, ok := cm.Data[key]; ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("platform settings ConfigMap %s/%s: %s is %q, not true or false; fix or delete the ConfigMap and apply the gpuslice_platform again", cm.Namespace, cm.Name, key, v)
			}
			*to = &b
		}
	}
	if runner, ok := cm.Data["runner"]; ok {
		ns, sa, found := strings.Cut(runner, "/")
		if !found {
			return nil, fmt.Errorf("platform settings ConfigMap %s/%s: runner is %q, not namespace/serviceaccount; fix or delete the ConfigMap and apply the gpuslice_platform again", cm.Namespace, cm.Name, runner)
		}
		p.Runner = &spec.Runner{Namespace: ns, ServiceAccount: sa}
	}
	// Absent in the ConfigMap of a gpuslice before scheduler_users: left
	// out, so the plan shows the policies it changes.
	if users, ok := cm.Data["schedulerUsers"]; ok && users != "" {
		p.SchedulerUsers = strings.Split(users, ",")
	}
	if strings.TrimSpace(cm.Data["fractions"]) == "" {
		return p, nil // no partitions
	}
	for _, f := range strings.Split(cm.Data["fractions"], ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("platform settings ConfigMap %s/%s: fraction %q is not a number; fix or delete the ConfigMap and apply the gpuslice_platform again", cm.Namespace, cm.Name, f)
		}
		p.Fractions = append(p.Fractions, n)
	}
	return p, nil
}
