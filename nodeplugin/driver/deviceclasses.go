package driver

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
}

// watchDeviceClasses starts the cache; it stops with ctx.
func watchDeviceClasses(ctx context.Context, client kubernetes.Interface) *deviceClasses {
	informer := resourceinformers.NewDeviceClassInformer(client, 0, cache.Indexers{})
	go informer.Run(ctx.Done())
	return &deviceClasses{client: client, lister: resourcelisters.NewDeviceClassLister(informer.GetIndexer())}
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
