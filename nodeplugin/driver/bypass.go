package driver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/nodeplugin/toolkit"
)

// EventReasonBypassOpen is the reason of the Warning event a plugin records
// on its Node when the node lets images pick GPUs.
const EventReasonBypassOpen = "GPUSelectionByImageOpen"

// checkToolkit tells the node's operators when its NVIDIA Container
// Toolkit lets any container pick GPUs through NVIDIA_VISIBLE_DEVICES,
// around every slice: a log line, gpuslice_node_env_bypass_open and an
// Event on the Node. The plugin still serves: the node's claims are as
// safe as before, but the node is not.
func (p *Plugin) checkToolkit(ctx context.Context) {
	if p.cfg.ToolkitConfig == "" {
		return
	}
	f, err := toolkit.Check(p.cfg.ToolkitConfig)
	if err != nil {
		p.log.Error(err, "cannot tell whether images can pick GPUs around the slices")
		return
	}
	if !f.Open {
		p.metrics.BypassOpen.Set(0)
		p.log.Info("node configuration checked: images cannot pick GPUs", "detail", f.Reason)
		return
	}
	p.metrics.BypassOpen.Set(1)
	p.log.Info("WARNING: this node lets any container pick GPUs around gpuslice's slices", "detail", f.Reason)
	p.nodeWarning(ctx, "gpu-selection-", "CheckNodeConfiguration", EventReasonBypassOpen, fmt.Sprintf("Containers can get GPUs without a claim: %s", f.Reason))
}

// nodeWarning records a Warning event on the plugin's Node; failing to
// record it is logged, never fatal.
func (p *Plugin) nodeWarning(ctx context.Context, namePrefix, action, reason, note string) {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: p.cfg.NodeName + "-" + namePrefix, Namespace: metav1.NamespaceDefault},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "gpuslice.dev/nodeplugin",
		ReportingInstance:   "gpuslice-nodeplugin-" + p.cfg.NodeName,
		Action:              action,
		Reason:              reason,
		Type:                corev1.EventTypeWarning,
		Regarding:           corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: p.cfg.NodeName, UID: p.cfg.NodeUID},
		Note:                note,
	}
	if _, err := p.cfg.Client.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		p.log.Error(err, "record an event on the node", "reason", reason)
	}
}
