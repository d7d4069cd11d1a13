package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// NodeSpec describes a fake node: an API object with capacity and a Ready
// condition, but no kubelet behind it, so pods bound to it are scheduled and
// never run.
type NodeSpec struct {
	Name   string
	CPU    string // e.g. "16"
	Memory string // e.g. "64Gi"
	Pods   string // e.g. "110"
	Labels map[string]string
}

// leaseDuration and heartbeatEvery mirror the kubelet's defaults; the
// node-lifecycle controller marks a node NotReady and taints it when its
// lease is not renewed within its grace period (≈50 s).
const (
	leaseDuration  = 40
	heartbeatEvery = 10 * time.Second
)

// AddNode registers a Ready node and keeps its lease renewed until Stop.
func (c *Cluster) AddNode(ctx context.Context, spec NodeSpec) (*corev1.Node, error) {
	node, err := RegisterNode(ctx, c.client, spec)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, spec.Name)
	c.mu.Unlock()
	return node, nil
}

// RegisterNode registers a Ready node with any API server and creates its
// lease once: the node stays Ready for the lease's duration (40 s) unless
// RenewLease is called, as AddNode's heartbeat does. Tests on a cluster of
// their own (KUBE_CONFIG_PATH) use it for simulated GPU nodes.
func RegisterNode(ctx context.Context, client kubernetes.Interface, spec NodeSpec) (*corev1.Node, error) {
	if spec.CPU == "" {
		spec.CPU = "16"
	}
	if spec.Memory == "" {
		spec.Memory = "64Gi"
	}
	if spec.Pods == "" {
		spec.Pods = "110"
	}
	capacity := corev1.ResourceList{}
	for name, value := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: spec.CPU, corev1.ResourceMemory: spec.Memory, corev1.ResourcePods: spec.Pods,
	} {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("node %s: %s capacity %q: %w", spec.Name, name, value, err)
		}
		capacity[name] = q
	}
	labels := map[string]string{"kubernetes.io/hostname": spec.Name, "kubernetes.io/os": "linux"}
	for k, v := range spec.Labels {
		labels[k] = v
	}

	nodes := client.CoreV1().Nodes()
	_, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	now := metav1.Now()
	status := corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "simulated node (no kubelet: pods are scheduled but never run)", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		NodeInfo: corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.37.2"},
	}
	// A patch, not an update: controllers (taints, CIDRs) change the fresh
	// node concurrently, and an update would conflict with them.
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, err
	}
	node, err := nodes.Patch(ctx, spec.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("mark node %s Ready: %w", spec.Name, err)
	}
	if err := RenewLease(ctx, client, spec.Name); err != nil {
		return nil, err
	}
	return node, nil
}

func (c *Cluster) heartbeat(ctx context.Context) {
	defer close(c.beatsDone)
	ticker := time.NewTicker(heartbeatEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		c.mu.Lock()
		names := append([]string(nil), c.nodes...)
		c.mu.Unlock()
		for _, name := range names {
			if err := RenewLease(ctx, c.client, name); err != nil && ctx.Err() == nil {
				c.logf("renew lease of node %s: %v", name, err)
			}
		}
	}
}

// RenewLease creates or renews the node's lease in kube-node-lease, as a
// kubelet would.
func RenewLease(ctx context.Context, client kubernetes.Interface, node string) error {
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To[int32](leaseDuration), RenewTime: &now,
			},
		}, metav1.CreateOptions{})
	} else if err == nil {
		lease.Spec.RenewTime = &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("renew lease of node %s: %w", node, err)
	}
	return nil
}
