package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
)

// showSlices prints what the node plugins published: per node, the GPU and
// how many devices of each fraction consume its counters.
func showSlices(ctx context.Context, client kubernetes.Interface) error {
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + contract.DriverName})
	if err != nil {
		return err
	}
	type gpu struct {
		model, uuid string
		fractions   map[int64]int
	}
	byNode := map[string]map[string]*gpu{}
	for _, s := range list.Items {
		node := ""
		if s.Spec.NodeName != nil {
			node = *s.Spec.NodeName
		}
		for _, d := range s.Spec.Devices {
			uuid := str(d.Attributes[contract.AttrUUID])
			if byNode[node] == nil {
				byNode[node] = map[string]*gpu{}
			}
			g := byNode[node][uuid]
			if g == nil {
				g = &gpu{model: str(d.Attributes[contract.AttrModel]), uuid: uuid, fractions: map[int64]int{}}
				byNode[node][uuid] = g
			}
			if f := d.Attributes[contract.AttrFraction].IntValue; f != nil {
				g.fractions[*f]++
			}
		}
	}
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		for _, uuid := range slices.Sorted(maps.Keys(byNode[node])) {
			g := byNode[node][uuid]
			var parts []string
			for _, f := range []int64{25, 50, 100} {
				if n := g.fractions[f]; n > 0 {
					parts = append(parts, fmt.Sprintf("%d × %d %%", n, f))
				}
			}
			fmt.Printf("     %-11s %s %s: %s, sharing one counter set (memory 32Gi, compute 100)\n", node, g.model, short(g.uuid), strings.Join(parts, ", "))
		}
	}
	return nil
}

// showPackages prints each package's DeviceClass: its slice and selector.
func showPackages(ctx context.Context, client kubernetes.Interface) error {
	list, err := client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{LabelSelector: contract.LabelManagedBy + "=" + contract.ManagedBy})
	if err != nil {
		return err
	}
	for _, dc := range list.Items {
		fmt.Printf("     DeviceClass %-16s %-5s of a %s  CEL: %s\n", dc.Name, dc.Annotations[contract.AnnotationMemory],
			dc.Annotations[contract.AnnotationGPUModel], dc.Spec.Selectors[0].CEL.Expression)
	}
	return nil
}

// showQuota prints a namespace's gpuslice ResourceQuota: hard and used.
func showQuota(ctx context.Context, client kubernetes.Interface, namespace string) error {
	q, err := client.CoreV1().ResourceQuotas(namespace).Get(ctx, render.QuotaName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	names := make([]string, 0, len(q.Spec.Hard))
	for name := range q.Spec.Hard {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		used := q.Status.Used[corev1.ResourceName(name)]
		hard := q.Spec.Hard[corev1.ResourceName(name)]
		fmt.Printf("     %-52s %6s used of %s\n", name, used.String(), hard.String())
	}
	return nil
}

func showClaim(c resourcev1.ResourceClaim) {
	r := c.Status.Allocation.Devices.Results[0]
	class := ""
	if reqs := c.Spec.Devices.Requests; len(reqs) > 0 && reqs[0].Exactly != nil {
		class = reqs[0].Exactly.DeviceClassName
	}
	fmt.Printf("     claim %s/%s (package %s) → slice %s on node %s\n", c.Namespace, c.Name, class, r.Device, r.Pool)
}

func str(a resourcev1.DeviceAttribute) string {
	if a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func short(uuid string) string {
	if len(uuid) > 12 {
		return uuid[:12] + "…"
	}
	return uuid
}
