package provider

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/engine/readback"
)

// gpuslice_platform: the platform namespace and its settings; import ID is
// the namespace.
var platformOps = typeOps{
	read: func(ctx context.Context, c kubernetes.Interface, id string, _ any) (any, error) {
		p, err := readback.Platform(ctx, c, id)
		if p == nil {
			return nil, err
		}
		return p, err
	},
	identity: []string{"namespace"},
	importAttributes: func(id string) (map[string]string, error) {
		if id == "" {
			return nil, fmt.Errorf("empty")
		}
		return map[string]string{"namespace": id}, nil
	},
}
