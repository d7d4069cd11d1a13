package provider

// Where a fast answer and the framework's differ (the server's check mode).

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
)

func (w *wireType) readDiff(fast, slow *tfprotov6.ReadResourceResponse) string {
	return firstDiff(
		valueDiff("new state", fast.NewState, slow.NewState, w.value),
		identityDiff(fast.NewIdentity, slow.NewIdentity, w.identity),
		bytesDiff("private", fast.Private, slow.Private),
		diagnosticsDiff(fast.Diagnostics, slow.Diagnostics),
	)
}

func (w *wireType) planDiff(fast, slow *tfprotov6.PlanResourceChangeResponse) string {
	replace := ""
	if len(fast.RequiresReplace) != len(slow.RequiresReplace) {
		replace = fmt.Sprintf("requires replace: %v, the framework's %v", fast.RequiresReplace, slow.RequiresReplace)
	}
	return firstDiff(
		valueDiff("planned state", fast.PlannedState, slow.PlannedState, w.value),
		identityDiff(fast.PlannedIdentity, slow.PlannedIdentity, w.identity),
		bytesDiff("private", fast.PlannedPrivate, slow.PlannedPrivate),
		replace,
		diagnosticsDiff(fast.Diagnostics, slow.Diagnostics),
	)
}

func firstDiff(diffs ...string) string {
	for _, d := range diffs {
		if d != "" {
			return d
		}
	}
	return ""
}

func valueDiff(what string, fast, slow *tfprotov6.DynamicValue, ty cty.Type) string {
	if (fast == nil) != (slow == nil) {
		return fmt.Sprintf("%s: %v, the framework's %v", what, fast != nil, slow != nil)
	}
	if fast == nil {
		return ""
	}
	f, fok := decode(fast, ty)
	s, sok := decode(slow, ty)
	if !fok || !sok || !f.RawEquals(s) {
		return fmt.Sprintf("%s: %#v, the framework's %#v", what, f, s)
	}
	return ""
}

func identityDiff(fast, slow *tfprotov6.ResourceIdentityData, ty cty.Type) string {
	var f, s *tfprotov6.DynamicValue
	if fast != nil {
		f = fast.IdentityData
	}
	if slow != nil {
		s = slow.IdentityData
	}
	return valueDiff("identity", f, s, ty)
}

func bytesDiff(what string, fast, slow []byte) string {
	if !bytes.Equal(fast, slow) {
		return fmt.Sprintf("%s: %q, the framework's %q", what, fast, slow)
	}
	return ""
}

func diagnosticsDiff(fast, slow []*tfprotov6.Diagnostic) string {
	f, s := describeDiagnostics(fast), describeDiagnostics(slow)
	if f != s {
		return fmt.Sprintf("diagnostics: %s, the framework's %s", f, s)
	}
	return ""
}

// describeDiagnostics lists diagnostics in a stable order.
func describeDiagnostics(ds []*tfprotov6.Diagnostic) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s %q %q at %v", d.Severity, d.Summary, d.Detail, d.Attribute))
	}
	sort.Strings(out)
	return "[" + strings.Join(out, "; ") + "]"
}
