package driver

import (
	"context"
	"fmt"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/health"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
)

// ReasonGPUUnhealthy: the claim's device is on a GPU the health watcher
// finds failing.
const ReasonGPUUnhealthy = "GPUUnhealthy"

// Defaults of the health watcher.
const (
	DefaultHealthRecovery = 5 * time.Minute
	DefaultHealthPoll     = 5 * time.Second
)

// startHealth watches the GPUs, and the Node for operators' clears, until
// the plugin stops.
func (p *Plugin) startHealth(ctx context.Context) error {
	ctx, p.stopHealth = context.WithCancel(ctx)
	p.healthChanged = newNotifier()
	w, err := health.Start(ctx, health.Config{
		NVML: p.cfg.NVML, GPUs: p.gpus, Recovery: p.cfg.HealthRecovery, Poll: p.cfg.HealthPoll, Logger: p.log,
		OnChange: p.healthChanged.notify,
	})
	if err != nil {
		p.stopHealth()
		return err
	}
	p.watcher = w
	p.watchHealthClears(ctx)
	return nil
}

// notifier wakes everyone waiting when it is notified: the republishing
// loop and each of the kubelet's health streams.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

// changed is closed at the next notice: take it before reading the state
// it guards, so no notice is missed between the two.
func (n *notifier) changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}

// unhealthyReason is why the GPU is unhealthy, "" if it is not.
func (p *Plugin) unhealthyReason(uuid string) string {
	f, _ := p.watcher.Fault(uuid)
	return f.Reason
}

// resources are the node's slices, an unhealthy GPU's devices tainted.
func (p *Plugin) resources() resourceslice.DriverResources {
	taints := publish.Taints{}
	now := time.Now()
	for uuid, f := range p.watcher.Unhealthy() {
		taints[uuid] = []resourcev1.DeviceTaint{unhealthyTaint(f, p.cfg.HealthEvictAfter, now)}
	}
	return publish.BuildTainted(p.cfg.NodeName, p.gpus, p.cfg.Publish, taints)
}

// unhealthyTaint is the taint of a GPU with fault f at now: NoSchedule,
// and NoExecute once the GPU has been unhealthy for evictAfter (0: never).
// A NoExecute taint is added when it turns NoExecute: the eviction
// controller counts a toleration's seconds from then.
func unhealthyTaint(f health.Fault, evictAfter time.Duration, now time.Time) resourcev1.DeviceTaint {
	t := resourcev1.DeviceTaint{Key: contract.TaintUnhealthy, Value: f.Reason, Effect: resourcev1.DeviceTaintEffectNoSchedule,
		TimeAdded: &metav1.Time{Time: f.Since}}
	if at, ok := evictAt(f, evictAfter); ok && !now.Before(at) {
		t.Effect, t.TimeAdded = resourcev1.DeviceTaintEffectNoExecute, &metav1.Time{Time: at}
	}
	return t
}

// evictAt is when a fault's taint turns NoExecute, if it ever does.
func evictAt(f health.Fault, evictAfter time.Duration) (time.Time, bool) {
	return f.Since.Add(evictAfter), evictAfter > 0
}

// nextEviction fires when the next unhealthy GPU's taint turns NoExecute;
// nil when none will. stop releases it.
func (p *Plugin) nextEviction(now time.Time) (fire <-chan time.Time, stop func()) {
	var next time.Time
	for _, f := range p.watcher.Unhealthy() {
		if at, ok := evictAt(f, p.cfg.HealthEvictAfter); ok && at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if next.IsZero() {
		return nil, func() {}
	}
	t := time.NewTimer(next.Sub(now))
	return t.C, func() { t.Stop() }
}

// republishOnChange hands the resourceslice controller the slices again
// after each change of a GPU's health (changed was taken before the last
// publish) and when an unhealthy GPU's taint turns NoExecute; the
// controller updates only what differs.
func (p *Plugin) republishOnChange(ctx context.Context, changed <-chan struct{}) {
	for {
		evict, stop := p.nextEviction(time.Now())
		select {
		case <-ctx.Done():
			stop()
			return
		case <-changed:
		case <-evict:
		}
		stop()
		changed = p.healthChanged.changed()
		if err := p.helper.PublishResources(ctx, p.resources()); err != nil && ctx.Err() == nil {
			p.log.Error(err, "republish ResourceSlices after a GPU's health changed")
		}
	}
}

// checkHealthy refuses devices of an unhealthy GPU. The scheduler does not
// place claims there, but a claim that tolerates the taint (its fields are
// the tenant's) or one allocated just before the GPU failed would
// otherwise start on a failing GPU.
func (p *Plugin) checkHealthy(ref string, devices []checkpoint.Device) error {
	for _, d := range devices {
		f, bad := p.watcher.Fault(d.GPUUUID)
		if !bad {
			continue
		}
		return &refusal{ReasonGPUUnhealthy, fmt.Sprintf("claim %s is allocated device %s on GPU %d (%s), which is unhealthy since %s: %s (taint %s=%s); no new slice is prepared there: delete the pod so its claim is allocated on a healthy GPU",
			ref, d.Name, d.GPUIndex, d.GPUUUID, f.Since.UTC().Format(time.RFC3339), f.Message, contract.TaintUnhealthy, f.Reason)}
	}
	return nil
}
