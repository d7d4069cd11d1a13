package provider_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/lock"
)

// The provider takes the state lock of a resource's stack, the lock
// gpuslice apply takes: while another writer holds it, apply fails at once
// naming the holder, and changes nothing.
func TestAccStateLockHeld(t *testing.T) {
	needCluster(t)
	const name = "acc-lock-8gi"
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var held *lock.Lock
	release := func() {
		if held != nil {
			held.Release(ctx)
			held = nil
		}
	}
	t.Cleanup(release)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy:             deviceClassGone(name),
		Steps: []resource.TestStep{
			{
				PreConfig: func() {
					held, err = e.Locks().Acquire(ctx, "tf-package-"+name, lock.Options{Who: "alice@laptop", Operation: "gpuslice apply"})
					if err != nil {
						t.Fatal(err)
					}
				},
				Config:      packageConfig(name, 25, ""),
				ExpectError: regexp.MustCompile(`(?s)Error acquiring the state lock.*alice@laptop.*Lock Info:.*force-unlock`),
			},
			{
				PreConfig: func() {
					if err := deviceClassGone(name)(&terraform.State{}); err != nil {
						t.Fatalf("apply under another writer's lock changed the cluster: %v", err)
					}
					release()
				},
				Config: packageConfig(name, 25, ""),
				Check:  deviceClassSelector(name, 25),
			},
		},
	})
}
