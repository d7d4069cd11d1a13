package provider

import (
	"context"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/engine/readback"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// gpuslice_package: one DeviceClass; import ID is the package name.
var packageOps = typeOps{
	read: func(ctx context.Context, c kubernetes.Interface, id string, _ any) (any, error) {
		p, err := readback.Package(ctx, c, id)
		if p == nil {
			return nil, err
		}
		return p, err
	},
	identity: []string{"name"},
	importAttributes: func(id string) (map[string]string, error) {
		if id == "" {
			return nil, fmt.Errorf("empty")
		}
		return map[string]string{"name": id}, nil
	},
	plannedComputed: func(target any) map[string]cty.Value {
		p := target.(*spec.Package)
		if p.MemoryBytes == 0 {
			return map[string]cty.Value{"memory_bytes": cty.NullVal(cty.Number), "memory": cty.NullVal(cty.String), "compute_share": cty.NullVal(cty.Number)}
		}
		return map[string]cty.Value{
			"memory_bytes": cty.NumberIntVal(p.MemoryBytes), "memory": cty.StringVal(p.Memory), "compute_share": cty.NumberIntVal(int64(p.ComputeShare)),
		}
	},
}
