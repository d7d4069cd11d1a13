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

// startHealth watches the GPUs until the plugin stops.
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
	for uuid, f := range p.watcher.Unhealthy() {
		taints[uuid] = []resourcev1.DeviceTaint{{
			Key: contract.TaintUnhealthy, Value: f.Reason, Effect: resourcev1.DeviceTaintEffectNoSchedule,
			TimeAdded: &metav1.Time{Time: f.Since},
		}}
	}
	return publish.BuildTainted(p.cfg.NodeName, p.gpus, p.cfg.Publish, taints)
}

// republishOnChange hands the resourceslice controller the slices again
// after each change of a GPU's health (changed was taken before the last
// publish); the controller updates only what differs.
func (p *Plugin) republishOnChange(ctx context.Context, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
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
