package driver

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuslice/gpuslice/contract"
)

// healthClears applies operators' clears of GPU health, read from the
// annotations of the plugin's own Node (contract.HealthClearedPrefix):
// tenants cannot write a Node, so no clear is a tenant's.
type healthClears struct {
	p *Plugin
	// seen is, by GPU UUID, the clear last applied: each is applied once,
	// when first read (the Node's other updates bring it again). The
	// informer calls the handler from one goroutine.
	seen map[string]string
}

// watchHealthClears follows the plugin's Node until ctx ends.
func (p *Plugin) watchHealthClears(ctx context.Context) {
	c := &healthClears{p: p, seen: map[string]string{}}
	factory := informers.NewSharedInformerFactoryWithOptions(p.cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, p.cfg.NodeName).String()
	}))
	informer := factory.Core().V1().Nodes().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.apply(obj) },
		UpdateFunc: func(_, obj any) { c.apply(obj) },
	}); err != nil {
		p.log.Error(err, "watch the Node for operators' clears of GPU health")
		return
	}
	factory.Start(ctx.Done())
}

func (c *healthClears) apply(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	now := time.Now()
	for key, value := range node.Annotations {
		uuid, ok := contract.HealthClearedGPU(key)
		if !ok {
			continue
		}
		if at, ok := c.newClear(uuid, value, now); ok {
			c.p.watcher.Clear(uuid, at)
		}
	}
}

// newClear is the time up to which a clear of GPU uuid not applied yet
// clears: its own, or the time the plugin first reads it if that is
// earlier, so a clock ahead of the node's never clears faults still to
// come.
func (c *healthClears) newClear(uuid, value string, now time.Time) (time.Time, bool) {
	if c.seen[uuid] == value {
		return time.Time{}, false
	}
	c.seen[uuid] = value
	at, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		c.p.log.Error(err, "GPU health clear ignored: its time is not RFC 3339 (gpuslice gpu clear writes it)", "node", c.p.cfg.NodeName, "annotation", contract.HealthClearedAnnotation(uuid), "value", value)
		return time.Time{}, false
	}
	if at.After(now) {
		at = now
	}
	return at, true
}
