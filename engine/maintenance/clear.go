package maintenance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/contract"
)

// Cleared is what a clear of GPU health did.
type Cleared struct {
	Target Target
	// GPUs are the GPUs the node plugin had tainted unhealthy, now
	// cleared; empty when none was (nothing was written).
	GPUs []*GPU
	// Reasons are their taints' values (e.g. xid-79), by GPU UUID.
	Reasons map[string]string
	// At is the time of the clear: the node plugin clears faults from
	// before it only.
	At time.Time
}

// ClearHealth tells the node plugin of the target's node that its GPUs it
// tainted unhealthy (contract.TaintUnhealthy) are healthy again as of now,
// without waiting for its recovery time: an annotation per GPU on the
// Node, which tenants cannot write (contract.HealthClearedPrefix). A fault
// after now taints the GPU again. GPUs without the taint are left alone.
func ClearHealth(ctx context.Context, cs kubernetes.Interface, t Target, now time.Time) (*Cleared, error) {
	gpus, err := nodeGPUs(ctx, cs, t.Node)
	if err != nil {
		return nil, err
	}
	if len(gpus) == 0 {
		return nil, noGPUs(t.Node)
	}
	if t.GPU != "" {
		g, err := pick(gpus, t)
		if err != nil {
			return nil, err
		}
		gpus = []*GPU{g}
	}
	out := &Cleared{Target: t, Reasons: map[string]string{}, At: now}
	annotations := map[string]string{}
	for _, g := range gpus {
		taint, ok := healthTaint(g)
		if !ok {
			continue
		}
		if g.UUID == "" {
			return nil, fmt.Errorf("clear %s: GPU %d publishes no %s attribute; upgrade the node plugin", t, g.Index, contract.AttrUUID)
		}
		// The plugin compares the clear with its own clock: one behind
		// the node's would clear nothing.
		if taint.TimeAdded != nil && taint.TimeAdded.After(now) {
			return nil, fmt.Errorf("clear %s: GPU %d's taint %s=%s was added at %s by node %s's clock, after this machine's time %s: this clock is behind the node's, so the node plugin would find the clear older than the fault; set this machine's time right (NTP) and clear again",
				t, g.Index, taint.Key, taint.Value, taint.TimeAdded.UTC().Format(time.RFC3339), t.Node, now.UTC().Format(time.RFC3339))
		}
		key := contract.HealthClearedAnnotation(g.UUID)
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("clear %s: GPU %d's UUID %q makes no annotation key: %s", t, g.Index, g.UUID, strings.Join(errs, "; "))
		}
		annotations[key] = now.UTC().Format(time.RFC3339Nano)
		out.GPUs = append(out.GPUs, g)
		out.Reasons[g.UUID] = taint.Value
	}
	if len(annotations) == 0 {
		return out, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return nil, err
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, t.Node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("clear %s: annotate Node %s: %w; clearing a GPU's health takes permission to patch Nodes (a cluster administrator's)", t, t.Node, err)
		}
		return nil, fmt.Errorf("clear %s: annotate Node %s: %w", t, t.Node, err)
	}
	return out, nil
}

// healthTaint is the node plugin's health taint on a GPU's devices.
func healthTaint(g *GPU) (resourcev1.DeviceTaint, bool) {
	for _, d := range g.Devices {
		for _, t := range d.Taints {
			if t.Key == contract.TaintUnhealthy {
				return t, true
			}
		}
	}
	return resourcev1.DeviceTaint{}, false
}

// WaitUntilUntainted waits up to timeout until the node plugin publishes
// no device of the cleared GPUs with its health taint, and returns how
// long that took.
func WaitUntilUntainted(ctx context.Context, cs kubernetes.Interface, c *Cleared, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	want := map[string]bool{}
	for _, g := range c.GPUs {
		want[g.UUID] = true
	}
	var still []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		gpus, err := nodeGPUs(ctx, cs, c.Target.Node)
		if err != nil {
			return false, err
		}
		still = nil
		for _, g := range gpus {
			if _, bad := healthTaint(g); bad && want[g.UUID] {
				still = append(still, fmt.Sprintf("%d (%s)", g.Index, g.UUID))
			}
		}
		return len(still) == 0, nil
	})
	if err != nil {
		return time.Since(start), fmt.Errorf("node %s: GPU(s) %s still tainted %s %v after the clear: a fault since the clear keeps a GPU tainted (the node plugin's log on %s says which), or the node's plugin does not run or predates gpuslice gpu clear: %w",
			c.Target.Node, strings.Join(still, ", "), contract.TaintUnhealthy, timeout, c.Target.Node, err)
	}
	return time.Since(start), nil
}

// healthOf is the node plugin's verdict on a GPU with these taints, from
// its health taint: "healthy", or "unhealthy: <reason> (<effect>)".
func healthOf(taints []Taint) string {
	for _, t := range taints {
		if t.Key == contract.TaintUnhealthy && t.FromSlice {
			return fmt.Sprintf("unhealthy: %s (%s)", t.Value, t.Effect)
		}
	}
	return "healthy"
}
