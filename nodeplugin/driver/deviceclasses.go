package driver

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
)

// deviceClasses reads the DeviceClasses that every prepare checks claims
// against: from a watch cache, so a prepare costs no extra request, and
// from the API server where the cache does not help (see checkRequest).
// Nothing waits for the cache to fill: until it has, every read goes to
// the API server.
type deviceClasses struct {
	client kubernetes.Interface
	lister resourcelisters.DeviceClassLister
	// synced says whether the cache has been filled once; nil when the
	// lister is filled by other means (tests)
	synced func() bool
}

// watchDeviceClasses starts the cache; it stops with ctx.
func watchDeviceClasses(ctx context.Context, client kubernetes.Interface) *deviceClasses {
	informer := resourceinformers.NewDeviceClassInformer(client, 0, cache.Indexers{})
	go informer.Run(ctx.Done())
	return &deviceClasses{client: client, lister: resourcelisters.NewDeviceClassLister(informer.GetIndexer()), synced: informer.HasSynced}
}

// cached is the class as last watched, nil if the cache has none.
func (c *deviceClasses) cached(name string) *resourceapi.DeviceClass {
	dc, err := c.lister.Get(name)
	if err != nil {
		return nil
	}
	return dc
}

// get reads the class from the API server.
func (c *deviceClasses) get(ctx context.Context, name string) (*resourceapi.DeviceClass, error) {
	return c.client.ResourceV1().DeviceClasses().Get(ctx, name, metav1.GetOptions{})
}

// packages are the slices of every package the cache holds (classes that
// are not packages, or whose annotations do not parse, are left out), and
// false until the cache has been filled: an empty cache is not "no
// packages".
func (c *deviceClasses) packages() ([]slicePackage, bool) {
	if c.synced != nil && !c.synced() {
		return nil, false
	}
	classes, err := c.lister.List(labels.Everything())
	if err != nil {
		return nil, false
	}
	var out []slicePackage
	for _, dc := range classes {
		if pkg, err := packageOf(dc); err == nil {
			out = append(out, pkg)
		}
	}
	return out, true
}
