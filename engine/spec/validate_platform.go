package spec

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuslice/gpuslice/contract"
)

func (v *validator) platform(p *Platform) {
	v.dnsLabel(p.Address, "namespace", p.Namespace, "namespace")
	if errs := validation.IsQualifiedName(p.TenantLabel); len(errs) > 0 {
		v.errorf(p.Address, "tenant_label", "Invalid label key", "%q: %s", p.TenantLabel, strings.Join(errs, "; "))
	}
	if len(p.Fractions) == 0 && !on(p.AnySize, contract.DefaultAnySize) && !on(p.TimeSlicing, contract.DefaultTimeSlicing) {
		// Not an error: a pool of GPUs in MIG mode offers its instances whatever
		// the switches say, and needs none of them.
		v.warningf(p.Address, "fractions", "Only MIG instances offered", "with no fractions, any_size or time_slicing, the node plugins offer only the instances of GPUs in MIG mode, and a plugin on a node with a GPU not in MIG mode fails to start; list fractions, e.g. [25, 50, 100], or set any_size = true, unless every GPU is in MIG mode")
	}
	v.schedulerUsers(p)
	seen := map[int]bool{}
	for i, f := range p.Fractions {
		attr := fmt.Sprintf("fractions[%d]", i)
		switch {
		case f <= 0 || f > 100:
			v.errorf(p.Address, attr, "Invalid fraction", "%d is not a percentage between 1 and 100", f)
		case 100%f != 0:
			v.errorf(p.Address, attr, "Invalid fraction", "%d %% does not divide a GPU into whole slices; use a divisor of 100 such as 10, 20, 25 or 50", f)
		case seen[f]:
			v.errorf(p.Address, attr, "Duplicate fraction", "%d is listed twice", f)
		}
		seen[f] = true
	}
	if np := p.NodePlugin; np != nil {
		v.nodePlugin(p.Address, np)
	}
	if rc := p.Reconcile; rc != nil {
		v.reconcile(p.Address, rc)
	}
	if r := p.Runner; r != nil {
		for attr, value := range map[string]string{"runner.namespace": r.Namespace, "runner.service_account": r.ServiceAccount} {
			if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 || (attr == "runner.namespace" && len(validation.IsDNS1123Label(value)) > 0) {
				v.errorf(p.Address, attr, "Invalid name", "%q is not a Kubernetes name (lower-case letters, digits and '-'): name the runner's existing namespace and ServiceAccount, e.g. flux-system and tf-runner", value)
			}
		}
	}
}

// schedulerUsers checks the names the admission policies compare
// request.userInfo.username with: they are rendered into CEL and into the
// platform's ConfigMap (comma-separated).
func (v *validator) schedulerUsers(p *Platform) {
	if p.SchedulerUsers != nil && len(p.SchedulerUsers) == 0 {
		v.errorf(p.Address, "scheduler_users", "No scheduler user", "an empty list would refuse every ResourceClaim kube-scheduler makes for a pod asking for a package by its extended resource name, "+
			"and such pods would never start; list the user your scheduler authenticates as, or leave scheduler_users out for %q", strings.Join(DefaultSchedulerUsers, ", "))
	}
	seen := map[string]bool{}
	for i, u := range p.SchedulerUsers {
		attr := fmt.Sprintf("scheduler_users[%d]", i)
		switch {
		case strings.TrimSpace(u) != u || u == "":
			v.errorf(p.Address, attr, "Invalid user name", "%q: give the user name exactly as the API server authenticates the scheduler (e.g. %q), without surrounding spaces", u, DefaultSchedulerUsers[0])
		case strings.ContainsAny(u, ",") || strings.IndexFunc(u, unicode.IsControl) >= 0:
			v.errorf(p.Address, attr, "Invalid user name", "%q contains a comma or a control character, which no Kubernetes authenticator gives a component; give the scheduler's user name, e.g. %q", u, DefaultSchedulerUsers[0])
		case seen[u]:
			v.errorf(p.Address, attr, "Duplicate user", "%q is listed twice; remove one", u)
		}
		seen[u] = true
	}
}

// on is an optional switch's value, def when left out.
func on(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// nodePlugin checks the platform's node_plugin block.
func (v *validator) nodePlugin(addr string, np *NodePlugin) {
	if _, err := name.ParseReference(np.Image); err != nil {
		v.errorf(addr, "node_plugin.image", "Invalid image reference", "%q: %v; write registry/repository:tag@sha256:…, as `make image-push` prints it", np.Image, err)
	} else if !strings.Contains(np.Image, "@sha256:") {
		v.warningf(addr, "node_plugin.image", "Image not pinned by digest", "%q can change under the same tag; pin it with @sha256:… (`make image-push` prints the digest) so every node runs the same plugin", np.Image)
	}
	for k := range np.Env {
		if k == "NODE_NAME" || k == "NODE_IP" {
			v.errorf(addr, "node_plugin.env", "Reserved variable", "%s is set by the node plugin's DaemonSet from the pod's node; remove it from env", k)
		}
	}
	if np.DriverRoot == "" || !strings.HasPrefix(np.DriverRoot, "/") {
		v.errorf(addr, "node_plugin.driver_root", "Not an absolute path", "%q: give the host directory holding the driver, / or /run/nvidia/driver", np.DriverRoot)
	}
	if np.ToolkitConfig != "" && !strings.HasPrefix(np.ToolkitConfig, "/") {
		v.errorf(addr, "node_plugin.toolkit_config", "Not an absolute path", "%q: give the host file, e.g. /etc/nvidia-container-runtime/config.toml, or leave it empty to skip the check", np.ToolkitConfig)
	}
	if d, ok := v.nodePluginDuration(addr, "health_recovery", np.HealthRecovery); ok && d == 0 {
		v.errorf(addr, "node_plugin.health_recovery", "Invalid duration", "%q: a failing GPU must stay quiet for a positive time before it is untainted, e.g. \"5m\" (the default when left out)", np.HealthRecovery)
	}
	v.nodePluginDuration(addr, "health_evict_after", np.HealthEvictAfter)
}

// nodePluginDuration checks an optional duration of the node_plugin block
// (a Go duration, not negative) and returns it.
func (v *validator) nodePluginDuration(addr, attr, value string) (time.Duration, bool) {
	if value == "" {
		return 0, false
	}
	d, err := time.ParseDuration(value)
	switch {
	case err != nil:
		v.errorf(addr, "node_plugin."+attr, "Invalid duration", "%q is not a Go duration: write a number with a unit, e.g. \"90s\", \"10m\" or \"1h30m\"", value)
		return 0, false
	case d < 0:
		v.errorf(addr, "node_plugin."+attr, "Invalid duration", "%q is negative: write 0 or a positive duration, e.g. \"10m\"", value)
		return 0, false
	}
	return d, true
}
