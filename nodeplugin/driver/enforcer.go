package driver

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/enforce"
)

// EventReasonMemoryLimitExceeded is the reason of the Warning event on a
// pod whose process the enforcer stopped for taking its claim over its
// memory limit.
const EventReasonMemoryLimitExceeded = "GPUMemoryLimitExceeded"

// startEnforcer runs the enforcer (package enforce) on the GPUs not in MIG
// mode until Stop.
func (p *Plugin) startEnforcer(ctx context.Context) {
	var uuids []string
	for _, g := range p.gpus {
		if !g.MIGEnabled {
			uuids = append(uuids, g.UUID)
		}
	}
	e := enforce.New(enforce.Config{
		NVML: p.cfg.NVML, GPUs: uuids, Claims: p.claimsToEnforce, ProcRoot: p.cfg.ProcRoot,
		OnKill: p.reportKill, Registerer: p.registerer, Logger: p.log,
	})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	p.stopEnforcer = func() { cancel(); <-done }
	go func() {
		defer close(done)
		e.Run(ctx)
	}()
}

// claimsToEnforce are the prepared claims the shim limits, each GPU with
// the memory the claim may use on it.
func (p *Plugin) claimsToEnforce() []enforce.Claim {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]enforce.Claim, 0, len(p.prepared))
	for uid, c := range p.prepared {
		if c.State != checkpoint.PrepareCompleted || !c.Limited() {
			continue
		}
		ec := enforce.Claim{UID: uid, Namespace: c.Namespace, Name: c.Name, PodUIDs: c.PodUIDs,
			LimitsFile: filepath.Join(p.accountingDir(uid), contract.LimitsFile)}
		for _, d := range c.Devices {
			ec.GPUs = append(ec.GPUs, enforce.GPU{UUID: d.GPUUUID, Limit: d.MemoryBytes})
		}
		out = append(out, ec)
	}
	return out
}

// reportKill records a kill as a Warning event on the pod, in the
// background (the enforcer has logged it and counted it).
func (p *Plugin) reportKill(k enforce.Kill) {
	if k.Err != nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		defer cancel()
		if err := p.killEvent(ctx, k); err != nil && ctx.Err() == nil {
			p.log.Error(err, "record the stopped process on its pod", "claim", k.Claim.Namespace+"/"+k.Claim.Name, "pid", k.Process.PID)
		}
	}()
}

func (p *Plugin) killEvent(ctx context.Context, k enforce.Kill) error {
	c := k.Claim
	// the pod's name is in the claim's reservations; the checkpoint keeps
	// only UIDs
	regarding := corev1.ObjectReference{Kind: "ResourceClaim", APIVersion: resourceapi.SchemeGroupVersion.String(), Namespace: c.Namespace, Name: c.Name, UID: types.UID(c.UID)}
	if claim, err := p.cfg.Client.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{}); err == nil {
		for _, r := range claim.Status.ReservedFor {
			if r.Resource == "pods" && string(r.UID) == k.PodUID {
				regarding = corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: c.Namespace, Name: r.Name, UID: r.UID}
			}
		}
	}
	proc := fmt.Sprintf("process %d", k.Process.PID)
	if k.Process.ContainerPID != 0 {
		proc = fmt.Sprintf("process %d (%s)", k.Process.ContainerPID, k.Process.Command)
	}
	note := fmt.Sprintf("Stopped %s on GPU %s: it held %d MiB of GPU memory (%d MiB more than at the check before), and claim %s used %d MiB of its %d MiB limit. "+
		"It allocated around the gpuslice library (a static binary, direct driver calls, or changed accounting files). "+
		"Run CUDA programs with the library loaded (a dynamically linked program in the claim's container), or use a package with more memory.",
		proc, k.GPU, k.Process.Used>>20, k.Process.Grew>>20, c.Name, k.ClaimUsed>>20, k.Limit>>20)
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: regarding.Name + "-gpu-memory-", Namespace: c.Namespace},
		EventTime:           metav1.NewMicroTime(k.At),
		ReportingController: "gpuslice.dev/nodeplugin",
		ReportingInstance:   "gpuslice-nodeplugin-" + p.cfg.NodeName,
		Action:              "StopProcess",
		Reason:              EventReasonMemoryLimitExceeded,
		Type:                corev1.EventTypeWarning,
		Regarding:           regarding,
		Related:             &corev1.ObjectReference{Kind: "ResourceClaim", APIVersion: resourceapi.SchemeGroupVersion.String(), Namespace: c.Namespace, Name: c.Name, UID: types.UID(c.UID)},
		Note:                note,
	}
	_, err := p.cfg.Client.EventsV1().Events(c.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
