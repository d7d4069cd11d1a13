package provider

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/engine/readback"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// gpuslice_quota: the namespace's tenant label and ResourceQuota; import
// ID is the namespace.
var quotaOps = typeOps{
	read: func(ctx context.Context, c kubernetes.Interface, id string, prior any) (any, error) {
		p, _ := prior.(*spec.Quota)
		q, err := readback.Quota(ctx, c, id, p)
		if q == nil {
			return nil, err
		}
		return q, err
	},
	identity: []string{"namespace"},
	importAttributes: func(id string) (map[string]string, error) {
		if id == "" {
			return nil, fmt.Errorf("empty")
		}
		return map[string]string{"namespace": id}, nil
	},
}
