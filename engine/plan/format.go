package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gpuslice/gpuslice/engine/diag"
)

var symbols = map[Action]string{Create: "+", Update: "~", Replace: "-/+", Delete: "-", Release: "~"}

// WriteText prints the plan the way Terraform does: one entry per object,
// grouped by resource, field-level before → after for updates, then a
// summary line.
func (p *Plan) WriteText(w io.Writer) {
	if !p.HasChanges() {
		fmt.Fprintf(w, "No changes. The cluster matches the configuration (stack %s).\n", p.Stack)
		return
	}
	fmt.Fprintf(w, "gpuslice will perform the following actions (stack %s):\n", p.Stack)
	last := "\x00"
	for _, c := range p.Changes {
		if c.Action == NoOp {
			continue
		}
		if c.Address != last {
			addr := c.Address
			if addr == "" {
				addr = "(objects of removed resources)"
			}
			fmt.Fprintf(w, "\n  # %s\n", addr)
			last = c.Address
		}
		fmt.Fprintf(w, "  %-3s %s%s\n", symbols[c.Action], c.Ref, describe(c))
		if c.Action == Update || c.Action == Replace {
			for _, f := range c.Fields {
				fmt.Fprintf(w, "        %s: %s → %s\n", f.Path, show(f.Before), show(f.After))
			}
		}
	}
	fmt.Fprintf(w, "\nPlan: %d to add, %d to change, %d to replace, %d to destroy, %d to release.\n",
		p.Count(Create), p.Count(Update), p.Count(Replace), p.Count(Delete), p.Count(Release))
}

func describe(c Change) string {
	switch c.Action {
	case Create:
		return " will be created"
	case Update:
		return " will be updated in place"
	case Replace:
		return " must be replaced (" + c.Reason + ")"
	case Delete:
		return " will be destroyed (no longer in the configuration)"
	case Release:
		if c.Reason != "" {
			return " keeps existing, released (" + c.Reason + ")"
		}
		return " keeps existing; gpuslice removes its labels"
	}
	return ""
}

// show prints a value compactly on one line.
func show(v any) string {
	if v == nil {
		return "(none)"
	}
	if s, ok := v.(string); ok {
		if len(s) > 120 {
			s = s[:117] + "..."
		}
		return fmt.Sprintf("%q", s)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	out := string(data)
	if len(out) > 120 {
		out = out[:117] + "..."
	}
	return strings.ReplaceAll(out, "\n", " ")
}

// jsonPlan is the machine-readable plan, versioned for consumers.
type jsonPlan struct {
	FormatVersion string         `json:"format_version"`
	Stack         string         `json:"stack"`
	Changes       []Change       `json:"changes"`
	Summary       map[string]int `json:"summary"`
	Diagnostics   []jsonDiag     `json:"diagnostics"`
}

type jsonDiag struct {
	Severity  string `json:"severity"`
	Summary   string `json:"summary"`
	Detail    string `json:"detail,omitempty"`
	Address   string `json:"address,omitempty"`
	Attribute string `json:"attribute,omitempty"`
	Range     string `json:"range,omitempty"`
}

// WriteJSON prints the plan as one JSON document; no-op changes are left
// out.
func (p *Plan) WriteJSON(w io.Writer, diags diag.Diagnostics) error {
	out := jsonPlan{FormatVersion: "1", Stack: p.Stack, Changes: []Change{}, Summary: map[string]int{}, Diagnostics: []jsonDiag{}}
	for _, c := range p.Changes {
		if c.Action != NoOp {
			out.Changes = append(out.Changes, c)
		}
	}
	for _, a := range []Action{Create, Update, Replace, Delete, Release} {
		out.Summary[string(a)] = p.Count(a)
	}
	for _, d := range diags {
		jd := jsonDiag{Severity: strings.ToLower(d.Severity.String()), Summary: d.Summary, Detail: d.Detail, Address: d.Address, Attribute: d.Attribute}
		if d.Range != nil {
			jd.Range = d.Range.String()
		}
		out.Diagnostics = append(out.Diagnostics, jd)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
