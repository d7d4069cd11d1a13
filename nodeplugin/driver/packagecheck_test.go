package driver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/kubeletsim"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// refusedCase is a claim the scheduler allocated (no admission policies
// here) and prepare must refuse, with what the refusal must say.
type refusedCase struct {
	claim  *resourcev1.ResourceClaim
	k      *kubeletsim.Client
	reason string
	says   []string
}

// TestPrepareHoldsEachClaimToItsPackage: with no admission in the way, the
// scheduler allocates whatever a claim asks of a package's class, and
// prepare refuses every allocation that is not exactly one slice of the
// package: more capacity of an any-size package or none at all (the
// extended-resource claim's default), another package's shares of a
// time-sliced device, a firstAvailable subrequest's too, two slices, a class
// that is no package, a class deleted since, a package whose selector
// picks other devices than it says. Each refusal is the claim's Prepared
// condition, False with the reason; the good claims beside them (in the
// same prepare call too) are prepared, and their files, checkpoint entries
// and regions stay exactly as they were.
func TestPrepareHoldsEachClaimToItsPackage(t *testing.T) {
	const anyNode, tsNode, partNode = "pkg-any", "pkg-ts", "pkg-part"
	e := newEnv(t, anyNode, tsNode, partNode)
	_, anyCfg := e.startPluginWith(anyNode, 1, publish.Options{Fractions: contract.DefaultFractions, AnySize: true})
	_, tsCfg := e.startPluginWith(tsNode, 1, publish.Options{Fractions: contract.DefaultFractions, TimeSliced: true})
	_, partCfg := e.startPlugin(partNode, 2)
	e.waitSlices(anyNode, 7+1)
	e.waitSlices(tsNode, 7+1)
	e.waitSlices(partNode, 2*7)
	anyK, _ := dialKubelet(t, anyCfg)
	tsK, _ := dialKubelet(t, tsCfg)
	partK, _ := dialKubelet(t, partCfg)

	small, tiny := e.anySizeClass("6Gi", 20), e.anySizeClass("1Gi", 5)
	pair, quad := e.timeSlicedClass(2), e.timeSlicedClass(4)
	quarter := e.class(25)
	model := simulate.V100PCIe32GB.Name
	gone := e.packageClass(spec.Package{Name: e.ns + "-gone", GPUModel: model, Fraction: 25})
	hand := e.classWith(e.ns+"-hand-25", render.Selector(model, 25))
	// a package's class whose selector was edited to pick 25 % slices
	edited := render.DeviceClass(&spec.Package{Name: e.ns + "-edited", GPUModel: model, Fraction: 50})
	edited.Spec.Selectors[0].CEL.Expression = render.Selector(model, 25)
	e.createClass(edited)

	capacity := func(pairs ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(pairs); i += 2 {
			m[pairs[i]] = pairs[i+1]
		}
		return m
	}
	place := func(pod, claim string) *resourcev1.ResourceClaim {
		cl, _ := e.placement(pod, claim, true)
		return cl
	}
	sub := func(name, class string, amounts map[string]string) resourcev1.DeviceRequest {
		r := resourcev1.DeviceSubRequest{Name: name, DeviceClassName: class, Count: 1, Capacity: &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{}}}
		for k, v := range amounts {
			r.Capacity.Requests[resourcev1.QualifiedName(k)] = resource.MustParse(v)
		}
		return resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{r}}
	}

	// The good claims, one of each kind, prepared first.
	goodAny := place("good-any", e.runPodCapacity("good-any", small, anyNode, capacity("memory", "6Gi", "compute", "20")))
	goodSub := place("good-sub", e.runPodRequest("good-sub", anyNode, sub("exact", tiny, capacity("memory", "1Gi", "compute", "5"))))
	goodTS := place("good-ts", e.runPodCapacity("good-ts", pair, tsNode, capacity("shares", itoa(contract.SharesOf(2)))))
	goodPart := place("good-part", e.runPod("good-part", quarter, partNode))
	for k, claims := range map[*kubeletsim.Client][]*resourcev1.ResourceClaim{anyK: {goodAny, goodSub}, tsK: {goodTS}, partK: {goodPart}} {
		if _, err := k.Prepare(e.ctx, claims...); err != nil {
			t.Fatalf("a claim of exactly its package refused: %v", err)
		}
	}
	cfgs := []driver.Config{anyCfg, tsCfg, partCfg}
	before := nodeFiles(t, cfgs...)

	v100 := "a Tesla V100-PCIE-32GB"
	cases := map[string]refusedCase{
		"more-memory-and-compute": {
			claim: place("more", e.runPodCapacity("more", small, anyNode, capacity("memory", "20Gi", "compute", "60"))), k: anyK, reason: driver.ReasonNotItsPackage,
			says: []string{`request "gpu" asks for package ` + small + " (6Gi of memory and 20% compute of " + v100 + ") but was allocated 20Gi of memory and 60% compute of device gpu-0-any-size",
				"capacity memory: 6Gi and compute: 20", "delete the pod so its claim is allocated again"},
		},
		"no-capacity": {
			claim: place("default", e.runPod("default", small, anyNode)), k: anyK, reason: driver.ReasonNotItsPackage,
			says: []string{"was allocated 256Mi of memory and 1% compute of device gpu-0-any-size", "not through an extended resource"},
		},
		"subrequest": {
			claim: place("sub", e.runPodRequest("sub", anyNode, sub("big", tiny, capacity("memory", "4Gi", "compute", "10")))), k: anyK, reason: driver.ReasonNotItsPackage,
			says: []string{`request "gpu/big" asks for package ` + tiny, "was allocated 4Gi of memory and 10% compute"},
		},
		"other-shares": {
			claim: place("shares", e.runPodCapacity("shares", quad, tsNode, capacity("shares", itoa(contract.SharesOf(2))))), k: tsK, reason: driver.ReasonNotItsPackage,
			says: []string{"(250000 shares of a time-sliced Tesla V100-PCIE-32GB (one of 4 per GPU)) but was allocated 500000 shares of device gpu-0-time-sliced",
				"capacity shares: 250000"},
		},
		"two-slices": {
			claim: place("two", e.runPodN("two", quarter, partNode, 2)), k: partK, reason: driver.ReasonNotItsPackage,
			says: []string{"was allocated 2 devices", "Ask for one device (count 1) per claim"},
		},
		"not-a-package": {
			claim: place("hand", e.runPod("hand", hand, partNode)), k: partK, reason: driver.ReasonNotItsPackage,
			says: []string{"names DeviceClass " + hand + ", which is not a gpuslice package (it has no gpuslice.dev/package label)", "use a package your namespace is granted"},
		},
		"edited-class": {
			claim: place("edited", e.runPod("edited", edited.Name, partNode)), k: partK, reason: driver.ReasonNotItsPackage,
			says: []string{"(a 50% slice of " + v100 + ") but was allocated device gpu-", "a 25% slice of " + v100, "The class's selector does not match its package"},
		},
		"class-gone": {
			claim: place("gone", e.runPod("gone", gone, partNode)), k: partK, reason: driver.ReasonPackageUnreadable,
			says: []string{"names DeviceClass " + gone + ", which does not exist (was its package removed?)"},
		},
	}
	if err := e.client.ResourceV1().DeviceClasses().Delete(e.ctx, gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, c := range cases {
		_, err := c.k.Prepare(e.ctx, c.claim)
		if err == nil {
			t.Errorf("%s: prepared; want a refusal", name)
			continue
		}
		for _, want := range append(c.says, "claim "+c.claim.Namespace+"/"+c.claim.Name) {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: refusal %q\nlacks %q", name, err, want)
			}
		}
		t.Logf("%s: %v", name, err)
		msg := strings.TrimPrefix(err.Error(), "claim "+c.claim.Namespace+"/"+c.claim.Name+": ")
		e.waitRefusal(c.claim, c.reason, msg)
	}
	// in one call with a good claim, the good one is prepared (again) and
	// the other refused
	if _, err := anyK.Prepare(e.ctx, goodAny, cases["more-memory-and-compute"].claim); err == nil || strings.Contains(err.Error(), goodAny.Name+":") {
		t.Errorf("a good and a refused claim in one call: %v; want only the second refused", err)
	}
	if after := nodeFiles(t, cfgs...); !mapsEqual(before, after) {
		t.Errorf("the refusals changed the node's files:\nbefore %v\nafter  %v", before, after)
	}
	for _, cfg := range cfgs {
		cp, err := mustCheckpoint(t, cfg.StateDir).Load()
		if err != nil {
			t.Fatal(err)
		}
		for uid, c := range cp.Claims {
			if !strings.HasPrefix(c.Name, "good-") || c.State != checkpoint.PrepareCompleted {
				t.Errorf("%s: checkpoint holds %s (%s/%s, %s)", cfg.NodeName, uid, c.Namespace, c.Name, c.State)
			}
		}
	}
	for k, claims := range map[*kubeletsim.Client][]*resourcev1.ResourceClaim{anyK: {goodAny, goodSub}, tsK: {goodTS}, partK: {goodPart}} {
		if err := k.Unprepare(e.ctx, claims...); err != nil {
			t.Fatal(err)
		}
	}
	for _, cfg := range cfgs {
		assertNothingLeft(t, cfg.CDIDir, cfg.AccountingRoot)
	}
}

// TestExtendedResourceClaims: a pod asking for a package
// by its DeviceClass's implicit extended resource name gets a claim the
// scheduler writes, with a count and no capacity. Prepare refuses what that
// hands out beyond the package: the any-size device's default (256Mi, 1 %),
// the time-sliced device's default (every share: the whole GPU), two 25 %
// slices in one claim; and prepares what is the package: two whole GPUs,
// one 25 % slice.
func TestExtendedResourceClaims(t *testing.T) {
	const anyNode, tsNode, partNode = "ext-any", "ext-ts", "ext-part"
	e := newEnv(t, anyNode, tsNode, partNode)
	_, anyCfg := e.startPluginWith(anyNode, 1, publish.Options{Fractions: contract.DefaultFractions, AnySize: true})
	_, tsCfg := e.startPluginWith(tsNode, 1, publish.Options{Fractions: contract.DefaultFractions, TimeSliced: true})
	_, partCfg := e.startPlugin(partNode, 4)
	e.waitSlices(anyNode, 7+1)
	e.waitSlices(tsNode, 7+1)
	e.waitSlices(partNode, 4*7)
	anyK, _ := dialKubelet(t, anyCfg)
	tsK, _ := dialKubelet(t, tsCfg)
	partK, _ := dialKubelet(t, partCfg)

	quarter := e.class(25)
	for _, tc := range []struct {
		pod, class, node string
		count            int64
		k                *kubeletsim.Client
		refusal          string // empty: prepared
	}{
		// whole GPUs first: the quarters then fit on the other two GPUs
		{"wholes", e.class(100), partNode, 2, partK, ""},
		{"any", e.anySizeClass("6Gi", 20), anyNode, 1, anyK, "was allocated 256Mi of memory and 1% compute of device gpu-0-any-size"},
		{"ts", e.timeSlicedClass(2), tsNode, 1, tsK, "was allocated 1000000 shares (all of them) of device gpu-0-time-sliced"},
		{"quarters", quarter, partNode, 2, partK, "was allocated 2 devices"},
		{"quarter", quarter, partNode, 1, partK, ""},
	} {
		cl := e.extendedResourcePod(tc.pod, tc.node, "deviceclass.resource.kubernetes.io/"+tc.class, tc.count)
		_, err := tc.k.Prepare(e.ctx, cl)
		switch {
		case tc.refusal == "" && err != nil:
			t.Errorf("%s: %d of package %s by its extended resource refused: %v", tc.pod, tc.count, tc.class, err)
		case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal) || !strings.Contains(err.Error(), "not through an extended resource") && tc.count == 1):
			t.Errorf("%s: %d of package %s by its extended resource: %v, want a refusal saying %q", tc.pod, tc.count, tc.class, err, tc.refusal)
		}
	}
}

// extendedResourcePod creates a pod on node asking for count of an
// extended resource backed by DRA and returns the claim the scheduler
// made for it once the pod is bound.
func (e *env) extendedResourcePod(name, node, resourceName string, count int64) *resourcev1.ResourceClaim {
	e.tb.Helper()
	_, err := e.client.CoreV1().Pods(e.ns).Create(e.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceName(resourceName): *resource.NewQuantity(count, resource.DecimalSI)},
			}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.tb.Fatal(err)
	}
	var cl *resourcev1.ResourceClaim
	err = wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		po, err := e.client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || po.Spec.NodeName == "" || po.Status.ExtendedResourceClaimStatus == nil {
			return false, err
		}
		cl, err = e.client.ResourceV1().ResourceClaims(e.ns).Get(ctx, po.Status.ExtendedResourceClaimStatus.ResourceClaimName, metav1.GetOptions{})
		return err == nil && cl.Status.Allocation != nil, err
	})
	if err != nil {
		e.tb.Fatalf("pod %s asking for %d %s: not bound with an allocated claim: %v", name, count, resourceName, err)
	}
	return cl
}

// TestPrepareReadsAChangedPackage: a package changed after the plugin
// cached its class (the same name, now another size) is prepared by what
// the API server holds now; a refusal never rests on the cached copy.
func TestPrepareReadsAChangedPackage(t *testing.T) {
	const node = "pkg-changed"
	e := newEnv(t, node)
	_, cfg := e.startPluginWith(node, 1, publish.Options{Fractions: contract.DefaultFractions, AnySize: true})
	e.waitSlices(node, 7+1)
	k, _ := dialKubelet(t, cfg)
	p := spec.Package{Name: e.ns + "-resized", GPUModel: simulate.V100PCIe32GB.Name, Memory: "8Gi", ComputeShare: 30}
	class := e.packageClass(p)
	cl, _ := e.placement("app", e.runPodCapacity("app", class, node, map[string]string{"memory": "6Gi", "compute": "20"}), true)
	if _, err := k.Prepare(e.ctx, cl); err == nil || !strings.Contains(err.Error(), "capacity memory: 8Gi and compute: 30") {
		t.Fatalf("a 6Gi claim of an 8Gi package: %v, want the refusal", err)
	}
	// the package is resized to what the claim got: prepared at once
	p.Memory, p.ComputeShare = "6Gi", 20
	resized := render.DeviceClass(&p)
	dc, err := e.client.ResourceV1().DeviceClasses().Get(e.ctx, class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dc.Annotations = resized.Annotations
	if _, err := e.client.ResourceV1().DeviceClasses().Update(e.ctx, dc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Prepare(e.ctx, cl); err != nil {
		t.Fatalf("the claim of the resized package: %v", err)
	}
	if err := k.Unprepare(e.ctx, cl); err != nil {
		t.Fatal(err)
	}
}

// waitRefusal waits until every gpuslice device in the claim's status
// carries the refusal: Prepared False with the reason and message.
func (e *env) waitRefusal(cl *resourcev1.ResourceClaim, reason, msg string) {
	e.tb.Helper()
	var last []resourcev1.AllocatedDeviceStatus
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := e.client.ResourceV1().ResourceClaims(cl.Namespace).Get(ctx, cl.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = c.Status.Devices
		n := 0
		for _, d := range c.Status.Devices {
			cond := meta.FindStatusCondition(d.Conditions, driver.ConditionPrepared)
			if d.Driver != contract.DriverName || cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason || cond.Message != msg {
				return false, nil
			}
			n++
		}
		return n == len(c.Status.Allocation.Devices.Results), nil
	})
	if err != nil {
		e.tb.Errorf("claim %s/%s: status.devices %+v; want each Prepared=False, reason %s, message %q: %v", cl.Namespace, cl.Name, last, reason, msg, err)
	}
}

// nodeFiles is every file the plugins keep for claims (CDI specs,
// accounting regions, checkpoints), path to content.
func nodeFiles(t *testing.T, cfgs ...driver.Config) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, cfg := range cfgs {
		for _, root := range []string{cfg.CDIDir, cfg.AccountingRoot, filepath.Join(cfg.StateDir, checkpoint.Name)} {
			err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				data, err := os.ReadFile(path)
				out[path] = string(data)
				if filepath.Base(path) == contract.LimitsFile {
					// the enforcer writes its observation in place every
					// sample: only the limits are the refusals' to keep
					l, decodeErr := accounting.DecodeLimits(data)
					l.ObservedUsed, l.ObservedSeq, l.Observed = 0, 0, time.Time{}
					out[path] = fmt.Sprintf("%+v %v", l, decodeErr)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
