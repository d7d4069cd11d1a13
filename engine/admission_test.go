package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/engine/render"
)

// TestHostileCorpusIsRefused submits every manifest of
// testdata/admission/hostile — one per way around the platform contract —
// to a tenant namespace and expects a gpuslice policy to refuse it with the
// message its header names. The same manifest is admitted in the
// platform's own namespace and in kube-system: the refusal is the policy's,
// and the policies leave non-tenant namespaces alone.
func TestHostileCorpusIsRefused(t *testing.T) {
	a := admission(t)
	ctx := context.Background()
	corpus := readCorpus(t, "testdata/admission/hostile")
	if len(corpus) < 30 {
		t.Fatalf("hostile corpus has %d manifests, want at least 30", len(corpus))
	}
	refused := 0
	for _, m := range corpus {
		t.Run(strings.TrimSuffix(m.file, ".yaml"), func(t *testing.T) {
			if m.expect == "" {
				t.Fatalf("%s has no '# expect: <message>' line", m.file)
			}
			err := a.dryRun(ctx, admissionTenant, m.obj)
			if policyDenial(err) == "" {
				t.Fatalf("admitted or refused by something else than a gpuslice policy in tenant namespace %s: %v", admissionTenant, err)
			}
			if !strings.Contains(err.Error(), m.expect) {
				t.Fatalf("refused with the wrong message:\n got: %v\nwant: …%s…", err, m.expect)
			}
			refused++
			for _, ns := range []string{admissionPlatform, "kube-system"} {
				if err := a.dryRun(ctx, ns, m.obj); err != nil {
					t.Errorf("refused in non-tenant namespace %s: %v", ns, err)
				}
			}
		})
	}
	t.Logf("hostile corpus: %d of %d manifests refused with their own message", refused, len(corpus))
}

// TestHandWrittenGoodCorpusIsAdmitted submits the hand-written manifests
// of testdata/admission/good — claims in exactly the documented shape and
// pods with settings close to the forbidden ones — to a tenant namespace.
func TestHandWrittenGoodCorpusIsAdmitted(t *testing.T) {
	a := admission(t)
	ctx := context.Background()
	for _, m := range readCorpus(t, "testdata/admission/good") {
		if err := a.dryRun(ctx, admissionTenant, m.obj); err != nil {
			t.Errorf("%s refused: %v", m.file, err)
		}
	}
}

// TestPolicyNamesAreStable pins the policy names the tests and the
// documentation refer to.
func TestPolicyNamesAreStable(t *testing.T) {
	for _, name := range []string{render.PolicyRawGPU, render.PolicySliceIsolation, render.PolicyReservedEnvKeys, render.PolicyClaimShape, render.PolicyClaimGrants} {
		if !strings.HasPrefix(name, "gpuslice-") {
			t.Errorf("policy %s does not start with gpuslice-; policyDenial relies on it", name)
		}
	}
}
