package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
)

const (
	v100 = "Tesla V100-PCIE-32GB"
	a100 = "NVIDIA A100-SXM4-40GB"
)

// TestPackageOfWhatTheEngineRenders: the plugin's parser reads every kind
// of package's class exactly as the engine renders it.
func TestPackageOfWhatTheEngineRenders(t *testing.T) {
	for _, tc := range []struct {
		pkg  spec.Package
		want slicePackage
	}{
		{spec.Package{Name: "q", GPUModel: v100, Fraction: 25, Memory: "8Gi"}, slicePackage{class: "q", model: v100, kind: contract.SharingPartition, fraction: 25}},
		{spec.Package{Name: "w", GPUModel: v100, Fraction: 100}, slicePackage{class: "w", model: v100, kind: contract.SharingPartition, fraction: 100}},
		{spec.Package{Name: "a", GPUModel: v100, Memory: "6Gi", ComputeShare: 20}, slicePackage{class: "a", model: v100, kind: contract.SharingAnySize, memory: 6 << 30, compute: 20}},
		{spec.Package{Name: "t", GPUModel: v100, Sharing: spec.SharingTimeSliced, Replicas: 3},
			slicePackage{class: "t", model: v100, kind: contract.SharingTimeSliced, replicas: 3, shares: contract.SharesOf(3)}},
		{spec.Package{Name: "m", GPUModel: a100, MIGProfile: "1g.5gb", Memory: "4864Mi"}, slicePackage{class: "m", model: a100, kind: contract.SharingMIG, migProfile: "1g.5gb"}},
	} {
		got, err := packageOf(render.DeviceClass(&tc.pkg))
		if err != nil || got != tc.want {
			t.Errorf("%+v: read as %+v, %v; want %+v", tc.pkg, got, err, tc.want)
		}
	}
}

// TestPackageOfRefusesWhatItCannotRead: a class without the package label
// is no package; a package's class with an annotation missing or out of
// range is refused, naming the annotation.
func TestPackageOfRefusesWhatItCannotRead(t *testing.T) {
	class := func(labels bool, annotations ...string) *resourceapi.DeviceClass {
		dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{}}}
		if labels {
			dc.Labels = map[string]string{contract.LabelPackage: "c"}
		}
		for i := 0; i+1 < len(annotations); i += 2 {
			dc.Annotations[annotations[i]] = annotations[i+1]
		}
		return dc
	}
	model := contract.AnnotationGPUModel
	for _, tc := range []struct {
		dc   *resourceapi.DeviceClass
		want string
	}{
		{class(false, model, v100, contract.AnnotationFraction, "25"), "DeviceClass c is not a gpuslice package: it has no gpuslice.dev/package label"},
		{class(true, contract.AnnotationFraction, "25"), `annotation gpuslice.dev/gpu-model is "", not a GPU model`},
		{class(true, model, v100, contract.AnnotationFraction, "0"), `annotation gpuslice.dev/fraction is "0", not a number from 1 to 100`},
		{class(true, model, v100, contract.AnnotationSharing, contract.SharingAnySize, contract.AnnotationComputeShare, "20"), "annotation gpuslice.dev/memory"},
		{class(true, model, v100, contract.AnnotationSharing, contract.SharingAnySize, contract.AnnotationMemory, "6Gi", contract.AnnotationComputeShare, "101"), "gpuslice.dev/compute-share"},
		{class(true, model, v100, contract.AnnotationSharing, contract.SharingTimeSliced, contract.AnnotationReplicas, "65"), "not a number from 1 to 64"},
		{class(true, model, v100, contract.AnnotationSharing, contract.SharingTimeSliced, contract.AnnotationReplicas, "2", contract.AnnotationShares, "1000000"),
			`annotation gpuslice.dev/shares is "1000000", not 500000 (the shares of one of 2 replicas)`},
		{class(true, model, a100, contract.AnnotationSharing, contract.SharingMIG), "not a MIG profile"},
		{class(true, model, v100, contract.AnnotationSharing, "mps"), `annotation gpuslice.dev/sharing is "mps", which this node plugin does not know; upgrade gpuslice-nodeplugin`},
	} {
		_, err := packageOf(tc.dc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v, want an error saying %q", tc.dc.Labels, tc.dc.Annotations, err, tc.want)
		}
		if notAPackage := errors.As(err, new(errNotAPackage)); notAPackage != (tc.dc.Labels == nil) {
			t.Errorf("%v: taken for no package: %v", tc.dc.Annotations, notAPackage)
		}
	}
}

// TestAdmitsExactlyOneSliceOfThePackage: each kind of package admits its
// own slice only, never another kind, model, size or profile, and several
// devices only of a whole-GPU package.
func TestAdmitsExactlyOneSliceOfThePackage(t *testing.T) {
	p := &Plugin{devices: map[string]publish.Device{}}
	for _, g := range []discovery.GPU{{Index: 0, UUID: "GPU-0", Name: v100}, {Index: 1, UUID: "GPU-1", Name: v100}, {Index: 2, UUID: "GPU-2", Name: a100}} {
		for _, name := range []string{"gpu-%d-25pct-1", "gpu-%d-25pct-2", "gpu-%d-100pct-1", "gpu-%d-any-size", "gpu-%d-time-sliced", "gpu-%d-mig-1g-5gb-0", "gpu-%d-mig-2g-10gb-0"} {
			d := strings.Replace(name, "%d", string(rune('0'+g.Index)), 1)
			p.devices[d] = publish.Device{Name: d, GPU: g}
		}
	}
	part := func(name string, fraction int) checkpoint.Device {
		return checkpoint.Device{Request: "gpu", Name: name, Fraction: fraction}
	}
	anySize := func(name string, memory uint64, compute int) checkpoint.Device {
		return checkpoint.Device{Request: "gpu", Name: name, Sharing: contract.SharingAnySize, ShareID: "s", MemoryBytes: memory, Fraction: compute}
	}
	timeSliced := func(name string, shares int64) checkpoint.Device {
		return checkpoint.Device{Request: "gpu", Name: name, Sharing: contract.SharingTimeSliced, ShareID: "s", Shares: shares}
	}
	mig := func(name, profile string) checkpoint.Device {
		return checkpoint.Device{Request: "gpu", Name: name, Sharing: contract.SharingMIG, MIG: &checkpoint.MIGInstance{Profile: profile}}
	}
	quarter := render.DeviceClass(&spec.Package{Name: "quarter", GPUModel: v100, Fraction: 25})
	whole := render.DeviceClass(&spec.Package{Name: "whole", GPUModel: v100, Fraction: 100})
	small := render.DeviceClass(&spec.Package{Name: "small", GPUModel: v100, Memory: "6Gi", ComputeShare: 20})
	pair := render.DeviceClass(&spec.Package{Name: "pair", GPUModel: v100, Sharing: spec.SharingTimeSliced, Replicas: 2})
	migSmall := render.DeviceClass(&spec.Package{Name: "mig", GPUModel: a100, MIGProfile: "1g.5gb"})
	selector := "The class's selector does not match its package"
	for _, tc := range []struct {
		name string
		dc   *resourceapi.DeviceClass
		devs []checkpoint.Device
		want []string // nil: admitted
	}{
		{"a quarter", quarter, []checkpoint.Device{part("gpu-0-25pct-1", 25)}, nil},
		{"two whole GPUs", whole, []checkpoint.Device{part("gpu-0-100pct-1", 100), part("gpu-1-100pct-1", 100)}, nil},
		{"its any-size slice", small, []checkpoint.Device{anySize("gpu-0-any-size", 6<<30, 20)}, nil},
		{"its shares", pair, []checkpoint.Device{timeSliced("gpu-0-time-sliced", 500000)}, nil},
		{"its MIG profile", migSmall, []checkpoint.Device{mig("gpu-2-mig-1g-5gb-0", "1g.5gb")}, nil},

		{"two quarters", quarter, []checkpoint.Device{part("gpu-0-25pct-1", 25), part("gpu-0-25pct-2", 25)},
			[]string{"was allocated 2 devices (gpu-0-25pct-1, gpu-0-25pct-2)", "Ask for one device (count 1) per claim"}},
		{"a whole GPU of a quarter package", quarter, []checkpoint.Device{part("gpu-0-100pct-1", 100)},
			[]string{"(a 25% slice of a " + v100 + ") but was allocated device gpu-0-100pct-1, a 100% slice", selector}},
		{"a quarter of another model", quarter, []checkpoint.Device{part("gpu-2-25pct-1", 25)}, []string{"a 25% slice of a " + a100, selector}},
		{"an any-size share of a partition package", quarter, []checkpoint.Device{anySize("gpu-0-any-size", 8<<30, 25)},
			[]string{"was allocated 8Gi of memory and 25% compute of device gpu-0-any-size", selector}},
		{"a partition of an any-size package", small, []checkpoint.Device{part("gpu-0-25pct-1", 25)}, []string{"device gpu-0-25pct-1, a 25% slice", selector}},
		{"less memory", small, []checkpoint.Device{anySize("gpu-0-any-size", 4<<30, 20)},
			[]string{"(6Gi of memory and 20% compute of a " + v100 + ") but was allocated 4Gi of memory and 20% compute", "capacity memory: 6Gi and compute: 20"}},
		{"more compute", small, []checkpoint.Device{anySize("gpu-0-any-size", 6<<30, 100)}, []string{"6Gi of memory and 100% compute"}},
		{"two any-size shares", small, []checkpoint.Device{anySize("gpu-0-any-size", 6<<30, 20), anySize("gpu-1-any-size", 6<<30, 20)}, []string{"2 devices"}},
		{"a time-sliced share of an any-size package", small, []checkpoint.Device{timeSliced("gpu-0-time-sliced", 500000)},
			[]string{"500000 shares of device gpu-0-time-sliced", selector}},
		{"all the shares", pair, []checkpoint.Device{timeSliced("gpu-0-time-sliced", contract.TimeSliceShares)},
			[]string{"1000000 shares (all of them) of device gpu-0-time-sliced", "capacity shares: 500000"}},
		{"an any-size share of a time-sliced package", pair, []checkpoint.Device{anySize("gpu-0-any-size", 32<<30, 100)}, []string{selector}},
		{"another MIG profile", migSmall, []checkpoint.Device{mig("gpu-2-mig-2g-10gb-0", "2g.10gb")},
			[]string{"(one MIG 1g.5gb instance of a " + a100 + ") but was allocated device gpu-2-mig-2g-10gb-0, a MIG 2g.10gb instance", selector}},
		{"two MIG instances", migSmall, []checkpoint.Device{mig("gpu-2-mig-1g-5gb-0", "1g.5gb"), mig("gpu-2-mig-2g-10gb-0", "1g.5gb")}, []string{"2 devices"}},
		{"a partition of a MIG package", migSmall, []checkpoint.Device{part("gpu-2-25pct-1", 25)}, []string{selector}},
	} {
		err := p.admits("ns/c", "gpu", tc.dc, tc.devs)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		var r *refusal
		if !errors.As(err, &r) || r.reason != ReasonNotItsPackage {
			t.Errorf("%s: %v, want a refusal for reason %s", tc.name, err, ReasonNotItsPackage)
			continue
		}
		for _, w := range append(tc.want, `claim ns/c: request "gpu" asks for package `+tc.dc.Name) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q\nlacks %q", tc.name, err, w)
			}
		}
	}
}

// TestRefusalNeverFromAStaleCache: where the cached class would refuse,
// or the cache has none, the class is read from the API server, whose copy
// decides. (What the cached copy admits stands: the cache lags the API
// server by a watch event at most.)
func TestRefusalNeverFromAStaleCache(t *testing.T) {
	c := clustertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := c.Client()
	for _, name := range []string{"stale-cache-resized", "stale-cache-uncached"} {
		dc := render.DeviceClass(&spec.Package{Name: name, GPUModel: v100, Memory: "6Gi", ComputeShare: 20})
		if _, err := client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.ResourceV1().DeviceClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	// the cache holds one class as it was (8Gi), and one deleted since
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, dc := range []*resourceapi.DeviceClass{
		render.DeviceClass(&spec.Package{Name: "stale-cache-resized", GPUModel: v100, Memory: "8Gi", ComputeShare: 30}),
		render.DeviceClass(&spec.Package{Name: "stale-cache-gone", GPUModel: v100, Memory: "8Gi", ComputeShare: 30}),
	} {
		if err := indexer.Add(dc); err != nil {
			t.Fatal(err)
		}
	}
	p := &Plugin{
		devices: map[string]publish.Device{"gpu-0-any-size": {Name: "gpu-0-any-size", GPU: discovery.GPU{UUID: "GPU-0", Name: v100}}},
		classes: &deviceClasses{client: client, lister: resourcelisters.NewDeviceClassLister(indexer)},
	}
	six := []checkpoint.Device{{Request: "gpu", Name: "gpu-0-any-size", Sharing: contract.SharingAnySize, ShareID: "s", MemoryBytes: 6 << 30, Fraction: 20}}
	for _, class := range []string{"stale-cache-resized", "stale-cache-uncached"} {
		if err := p.checkRequest(ctx, "ns/c", "gpu", class, six); err != nil {
			t.Errorf("%s: refused without reading the API server's copy: %v", class, err)
		}
	}
	var r *refusal
	if err := p.checkRequest(ctx, "ns/c", "gpu", "stale-cache-gone", six); !errors.As(err, &r) || r.reason != ReasonPackageUnreadable || !strings.Contains(r.msg, "which does not exist") {
		t.Errorf("a class deleted since it was cached: %v", err)
	}
}
