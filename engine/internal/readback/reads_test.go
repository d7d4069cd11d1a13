package readback_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/engine/internal/readback"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/spec"
)

func bareWorkload() *spec.Workload {
	return &spec.Workload{Meta: spec.Meta{Address: "w"}, Namespace: "team-a", Name: "ollama", Package: "v100-8gi", Kind: spec.KindDeployment, Replicas: 1,
		GPUsPerPod: 1, Workers: 1, WaitFor: "none", Timeout: "10m", PreloadImage: "curlimages/curl:8.11.1",
		Container: spec.Container{Image: "ollama/ollama:0.24.0", CPURequest: "1", MemoryRequest: "2Gi"}}
}

// kindsRead lists the resources the view reads, by name.
func kindsRead(v *view.View) string {
	var out []string
	for _, i := range v.Informers() {
		out = append(out, i.Resource.GVR.Resource)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// A resource read back with its prior reads the kinds the prior has, so a
// namespace pays no read for kinds none of its resources has: a workload
// without volume, Service, preload or autoscaler reads its controller's
// kind alone, a quota without tenants no RoleBinding. What the prior has
// but the cluster lost is still seen: a Service deleted outside gpuslice
// reads back as no expose. An import (no prior) reads every kind.
func TestReadBackReadsThePriorsKinds(t *testing.T) {
	ctx := context.Background()
	pkg := fullPackage()
	w := bareWorkload()
	c := cluster(t, &spec.Stack{Name: "s", Packages: []*spec.Package{pkg}, Workloads: []*spec.Workload{w}})
	got, err := readback.Workload(ctx, c, w.Namespace, w.Name, w)
	want := *w
	want.Meta = spec.Meta{}
	check(t, err, got, &want)
	if k := kindsRead(c); k != "deployments" {
		t.Errorf("read back with a prior of a bare Deployment, the view read %q; want deployments alone", k)
	}

	exposed := bareWorkload()
	exposed.Expose = &spec.Expose{Port: 80}
	c = cluster(t, &spec.Stack{Name: "s", Packages: []*spec.Package{pkg}, Workloads: []*spec.Workload{w}}) // its Service is gone
	got, err = readback.Workload(ctx, c, w.Namespace, w.Name, exposed)
	check(t, err, got, &want)
	if k := kindsRead(c); k != "deployments services" {
		t.Errorf("read back with a prior that exposes it, the view read %q; want deployments services", k)
	}

	// An import's state names the workload alone.
	for _, prior := range []*spec.Workload{nil, {Namespace: w.Namespace, Name: w.Name}} {
		c = cluster(t, &spec.Stack{Name: "s", Packages: []*spec.Package{pkg}, Workloads: []*spec.Workload{exposed}})
		if got, err = readback.Workload(ctx, c, w.Namespace, w.Name, prior); err != nil || got == nil || got.Expose == nil {
			t.Fatalf("import: %+v, %v; want the workload with its expose", got, err)
		}
		if k := kindsRead(c); k != "deployments horizontalpodautoscalers jobs persistentvolumeclaims services statefulsets" {
			t.Errorf("an import read %q; want every kind a workload may have", k)
		}
	}

	quota := fullQuota()
	quota.TenantUsers, quota.TenantGroups = nil, nil
	c = cluster(t, &spec.Stack{Name: "s", Packages: []*spec.Package{pkg}, Quotas: []*spec.Quota{quota}})
	gotQuota, err := readback.Quota(ctx, c, quota.Namespace, quota)
	wantQuota := *quota
	wantQuota.Meta = spec.Meta{}
	check(t, err, gotQuota, &wantQuota)
	if k := kindsRead(c); k != "resourcequotas" {
		t.Errorf("a quota without tenants read back read %q; want resourcequotas alone", k)
	}
	withTenants := fullQuota()
	c = cluster(t, &spec.Stack{Name: "s", Packages: []*spec.Package{pkg}, Quotas: []*spec.Quota{withTenants}})
	gotQuota, err = readback.Quota(ctx, c, quota.Namespace, &spec.Quota{Namespace: quota.Namespace}) // an import's state
	if err != nil || gotQuota == nil || len(gotQuota.TenantUsers) != 1 {
		t.Fatalf("import of a quota: %+v, %v; want its tenants", gotQuota, err)
	}
}
