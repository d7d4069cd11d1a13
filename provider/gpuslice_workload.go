package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/readback"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// gpuslice_workload: claim template, controller, volume, Service and
// preload Job; import ID is <namespace>/<name>. Create and update wait as
// wait_for says, within the timeouts block (default: timeout plus a minute).
var workloadOps = typeOps{
	read: func(ctx context.Context, c kubernetes.Interface, id string, prior any) (any, error) {
		ns, name, ok := strings.Cut(id, "/")
		if !ok {
			return nil, fmt.Errorf("id %q is not <namespace>/<name>", id)
		}
		p, _ := prior.(*spec.Workload)
		w, err := readback.Workload(ctx, c, ns, name, p)
		if w == nil {
			return nil, err
		}
		return w, err
	},
	identity: []string{"namespace", "name"},
	importAttributes: func(id string) (map[string]string, error) {
		ns, name, ok := strings.Cut(id, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("want <namespace>/<name>, e.g. team-a/ollama")
		}
		return map[string]string{"namespace": ns, "name": name}, nil
	},
	plannedComputed: func(target any) map[string]cty.Value {
		w := target.(*spec.Workload)
		addr := ""
		if w.Expose != nil {
			addr = fmt.Sprintf("%s.%s.svc:%d", w.Name, w.Namespace, w.Expose.Port)
		}
		return map[string]cty.Value{"service_address": cty.StringVal(addr)}
	},
	computed: func(ctx context.Context, e *engine.Engine, target any) (map[string]cty.Value, error) {
		st, err := e.ResourceStatus(ctx, target.(*spec.Workload))
		if err != nil {
			return nil, err
		}
		reason := st.Message
		if reason == "" {
			reason = string(st.Reason)
		}
		return map[string]cty.Value{
			"phase": cty.StringVal(string(st.Phase)), "reason": cty.StringVal(reason),
			"claim": cty.StringVal(st.Claim), "node": cty.StringVal(st.Node), "device": cty.StringVal(st.Device),
		}, nil
	},
	unknownOnChange: []string{"phase", "reason", "claim", "node", "device"},
	timeouts:        true,
	wait: func(target any) time.Duration {
		d, err := time.ParseDuration(target.(*spec.Workload).Timeout)
		if err != nil {
			d = 10 * time.Minute
		}
		return d + time.Minute
	},
}
