package maintenance

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/contract"
)

// GPU is one physical GPU of a node and the devices its node plugin
// publishes for it: partitions, shared devices and MIG instances alike.
type GPU struct {
	Node  string
	Index int64
	UUID  string
	Model string
	// Devices are the GPU's devices, by pool and name.
	Devices []DeviceRef
}

// DeviceRef names one published device.
type DeviceRef struct {
	Pool, Name string
	// Taints are those its node plugin publishes in the ResourceSlice.
	Taints []resourcev1.DeviceTaint
}

// nodeGPUs reads the GPUs node publishes, by index. A MIG instance is
// its parent GPU's: its own uuid is the instance's.
func nodeGPUs(ctx context.Context, cs kubernetes.Interface, node string) ([]*GPU, error) {
	sel := fields.Set{resourcev1.ResourceSliceSelectorDriver: contract.DriverName, resourcev1.ResourceSliceSelectorNodeName: node}.AsSelector().String()
	list, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list the ResourceSlices of node %s: %w", node, err)
	}
	return groupGPUs(list.Items), nil
}

// groupGPUs groups the devices of slices by GPU, by node and index.
func groupGPUs(slices []resourcev1.ResourceSlice) []*GPU {
	byKey := map[string]*GPU{}
	for _, sl := range slices {
		if sl.Spec.Driver != contract.DriverName || sl.Spec.NodeName == nil {
			continue
		}
		node := *sl.Spec.NodeName
		for _, d := range sl.Spec.Devices {
			uuid := str(d.Attributes[contract.AttrUUID])
			if str(d.Attributes[contract.AttrSharing]) == contract.SharingMIG {
				uuid = str(d.Attributes[contract.AttrParentUUID])
			}
			index := int64(-1)
			if a := d.Attributes[contract.AttrIndex]; a.IntValue != nil {
				index = *a.IntValue
			}
			key := node + "/" + uuid
			if uuid == "" {
				key = node + "/" + strconv.FormatInt(index, 10)
			}
			g := byKey[key]
			if g == nil {
				g = &GPU{Node: node, Index: index, UUID: uuid, Model: str(d.Attributes[contract.AttrModel])}
				byKey[key] = g
			}
			g.Devices = append(g.Devices, DeviceRef{Pool: sl.Spec.Pool.Name, Name: d.Name, Taints: d.Taints})
		}
	}
	out := make([]*GPU, 0, len(byKey))
	for _, g := range byKey {
		sort.Slice(g.Devices, func(i, j int) bool {
			if g.Devices[i].Pool != g.Devices[j].Pool {
				return g.Devices[i].Pool < g.Devices[j].Pool
			}
			return g.Devices[i].Name < g.Devices[j].Name
		})
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Index < out[j].Index
	})
	return out
}

// pick is the GPU of gpus that target names (index or UUID).
func pick(gpus []*GPU, t Target) (*GPU, error) {
	var have []string
	for _, g := range gpus {
		if strconv.FormatInt(g.Index, 10) == t.GPU || g.UUID == t.GPU {
			return g, nil
		}
		have = append(have, fmt.Sprintf("%d (%s)", g.Index, g.UUID))
	}
	return nil, fmt.Errorf("node %s has no GPU %s: its node plugin publishes GPUs %v; name one by index or UUID", t.Node, t.GPU, have)
}

func str(a resourcev1.DeviceAttribute) string {
	if a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}
