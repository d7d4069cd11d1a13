package engine_test

import (
	"context"
	"strings"
	"testing"
)

// BenchmarkAdmission measures what the policies add to admitting a pod and
// a claim: server-side dry-run creates in a tenant namespace, where every
// policy is evaluated, against the platform's namespace, where none is
// bound. Figures, not pass/fail.
func BenchmarkAdmission(b *testing.B) {
	a := admission(b)
	ctx := context.Background()
	for _, file := range []string{"pod-with-claim-and-ordinary-settings.yaml", "claim-documented-shape.yaml"} {
		m, err := readManifest("testdata/admission/good/" + file)
		if err != nil {
			b.Fatal(err)
		}
		for _, ns := range []string{admissionTenant, admissionPlatform} {
			b.Run(m.obj.GetKind()+"/"+strings.TrimPrefix(ns, "adm-"), func(b *testing.B) {
				for b.Loop() {
					if err := a.dryRun(ctx, ns, m.obj); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
