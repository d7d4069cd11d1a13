package fastpath

// Check mode: where a fast answer and the framework's differ. Every field
// of each response is compared (TestDiffsCompareEveryField holds that
// when the protocol gains one).

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"
)

// compare adds an error to diags when the framework's answer to the
// request failed or diff finds differences.
func (s *Server) compare(ctx context.Context, diags *[]*tfprotov6.Diagnostic, what string, err error, diff func() []string) {
	var found []string
	if d := recordDiffers(ctx); d != "" {
		found = append(found, d)
	}
	if err != nil {
		found = append(found, fmt.Sprintf("the framework failed: %v", err))
	} else {
		found = append(found, diff()...)
	}
	if len(found) == 0 {
		return
	}
	*diags = append(*diags, &tfprotov6.Diagnostic{Severity: tfprotov6.DiagnosticSeverityError,
		Summary: "gpuslice fast path differs from the framework",
		Detail: what + ": " + strings.Join(found, "; ") + "\n\nThis is a bug in the gpuslice provider; " +
			EnvVar + "=off serves every request through the framework meanwhile."})
}

func validateDiff(fast, slow *tfprotov6.ValidateResourceConfigResponse) []string {
	return nonEmpty(diagnosticsDiff(fast.Diagnostics, slow.Diagnostics))
}

func upgradeDiff(t *resourceType, fast, slow *tfprotov6.UpgradeResourceStateResponse) []string {
	return nonEmpty(
		valueDiff("upgraded state", fast.UpgradedState, slow.UpgradedState, t.value),
		diagnosticsDiff(fast.Diagnostics, slow.Diagnostics),
	)
}

func readDiff(t *resourceType, fast, slow *tfprotov6.ReadResourceResponse) []string {
	return nonEmpty(
		valueDiff("new state", fast.NewState, slow.NewState, t.value),
		identityDiff(fast.NewIdentity, slow.NewIdentity, t.identity),
		bytesDiff("private", fast.Private, slow.Private),
		deferredDiff(fast.Deferred, slow.Deferred),
		diagnosticsDiff(fast.Diagnostics, slow.Diagnostics),
	)
}

func planDiff(t *resourceType, fast, slow *tfprotov6.PlanResourceChangeResponse) []string {
	var legacy string
	//lint:ignore SA1019 check mode compares every field of the answer, this deprecated one too
	if fast.UnsafeToUseLegacyTypeSystem != slow.UnsafeToUseLegacyTypeSystem {
		legacy = fmt.Sprintf("legacy type system: %v, the framework's %v", !slow.UnsafeToUseLegacyTypeSystem, slow.UnsafeToUseLegacyTypeSystem) //lint:ignore SA1019 (as above)
	}
	return nonEmpty(
		valueDiff("planned state", fast.PlannedState, slow.PlannedState, t.value),
		identityDiff(fast.PlannedIdentity, slow.PlannedIdentity, t.identity),
		pathsDiff("requires replace", fast.RequiresReplace, slow.RequiresReplace),
		bytesDiff("private", fast.PlannedPrivate, slow.PlannedPrivate),
		deferredDiff(fast.Deferred, slow.Deferred),
		legacy,
		diagnosticsDiff(fast.Diagnostics, slow.Diagnostics),
	)
}

func nonEmpty(diffs ...string) []string {
	var out []string
	for _, d := range diffs {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

func valueDiff(what string, fast, slow *tfprotov6.DynamicValue, ty cty.Type) string {
	if (fast == nil) != (slow == nil) {
		return fmt.Sprintf("%s: present %v, the framework's %v", what, fast != nil, slow != nil)
	}
	if fast == nil {
		return ""
	}
	f, fok := decode(fast, ty)
	s, sok := decode(slow, ty)
	switch {
	case fok && sok && f.RawEquals(s):
		return ""
	case fok && sok:
		return fmt.Sprintf("%s: %#v, the framework's %#v", what, f, s)
	case bytes.Equal(fast.MsgPack, slow.MsgPack) && bytes.Equal(fast.JSON, slow.JSON):
		return ""
	}
	return fmt.Sprintf("%s: %q %q, the framework's %q %q", what, fast.MsgPack, fast.JSON, slow.MsgPack, slow.JSON)
}

func identityDiff(fast, slow *tfprotov6.ResourceIdentityData, ty cty.Type) string {
	if (fast == nil) != (slow == nil) {
		return fmt.Sprintf("identity: present %v, the framework's %v", fast != nil, slow != nil)
	}
	if fast == nil {
		return ""
	}
	return valueDiff("identity", fast.IdentityData, slow.IdentityData, ty)
}

func bytesDiff(what string, fast, slow []byte) string {
	if !bytes.Equal(fast, slow) {
		return fmt.Sprintf("%s: %q, the framework's %q", what, fast, slow)
	}
	return ""
}

func deferredDiff(fast, slow *tfprotov6.Deferred) string {
	describe := func(d *tfprotov6.Deferred) string {
		if d == nil {
			return "none"
		}
		return d.Reason.String()
	}
	if f, s := describe(fast), describe(slow); f != s {
		return fmt.Sprintf("deferred: %s, the framework's %s", f, s)
	}
	return ""
}

// pathsDiff compares two lists of paths, each path in full and in order
// (the framework sorts and deduplicates its own).
func pathsDiff(what string, fast, slow []*tftypes.AttributePath) string {
	f, s := describePaths(fast), describePaths(slow)
	if f != s {
		return fmt.Sprintf("%s: %s, the framework's %s", what, f, s)
	}
	return ""
}

func describePaths(ps []*tftypes.AttributePath) string {
	var out []string
	for _, p := range ps {
		out = append(out, describePath(p))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

func describePath(p *tftypes.AttributePath) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", p.String())
}

func diagnosticsDiff(fast, slow []*tfprotov6.Diagnostic) string {
	f, s := describeDiagnostics(fast), describeDiagnostics(slow)
	if f != s {
		return fmt.Sprintf("diagnostics: %s, the framework's %s", f, s)
	}
	return ""
}

// describeDiagnostics lists diagnostics, every field of each, in a stable
// order.
func describeDiagnostics(ds []*tfprotov6.Diagnostic) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s %q %q at %s", d.Severity, d.Summary, d.Detail, describePath(d.Attribute)))
	}
	sort.Strings(out)
	return "[" + strings.Join(out, "; ") + "]"
}
