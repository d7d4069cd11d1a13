// Package diag is how every part of the engine reports a problem: on which
// resource and attribute, at which file:line:column when the configuration
// came from HCL, and what to do about it. The CLI prints diagnostics; the
// provider turns them into Terraform diagnostics on the same attribute.
package diag

import (
	"errors"
	"fmt"
	"strings"
)

// Severity of a diagnostic.
type Severity int

const (
	// Error stops validation, plan or apply.
	Error Severity = iota
	// Warning is shown and does not stop anything.
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "Warning"
	}
	return "Error"
}

// Range is a position in a configuration file.
type Range struct {
	Filename string
	Line     int
	Column   int
}

func (r Range) String() string { return fmt.Sprintf("%s:%d:%d", r.Filename, r.Line, r.Column) }

// Diagnostic is one problem.
type Diagnostic struct {
	Severity Severity
	Summary  string
	Detail   string
	// Address is the resource's configuration address, e.g.
	// gpuslice_workload.ollama; empty for problems outside resources.
	Address string
	// Attribute is the path inside the resource: "fraction",
	// "container.image", `slices["v100-8gi"]`, "container.port[0].name".
	Attribute string
	// Range is where in the files the problem is, when known.
	Range *Range
}

// Error formats the diagnostic on one line, position first.
func (d Diagnostic) Error() string {
	var b strings.Builder
	if d.Range != nil {
		b.WriteString(d.Range.String())
		b.WriteString(": ")
	}
	if d.Address != "" {
		b.WriteString(d.Address)
		if d.Attribute != "" {
			b.WriteString(".")
			b.WriteString(d.Attribute)
		}
		b.WriteString(": ")
	}
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(d.Detail)
	}
	return b.String()
}

// Diagnostics is a list of problems in the order found.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Errors returns the error diagnostics.
func (ds Diagnostics) Errors() Diagnostics { return ds.filter(Error) }

// Warnings returns the warning diagnostics.
func (ds Diagnostics) Warnings() Diagnostics { return ds.filter(Warning) }

func (ds Diagnostics) filter(s Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}

// Err returns the errors joined as one error, or nil.
func (ds Diagnostics) Err() error {
	var errs []error
	for _, d := range ds.Errors() {
		errs = append(errs, d)
	}
	return errors.Join(errs...)
}

// Errorf builds an error diagnostic on an attribute of a resource.
func Errorf(address, attribute, summary, detailFormat string, args ...any) Diagnostic {
	return Diagnostic{Severity: Error, Address: address, Attribute: attribute, Summary: summary, Detail: fmt.Sprintf(detailFormat, args...)}
}

// Warningf builds a warning diagnostic on an attribute of a resource.
func Warningf(address, attribute, summary, detailFormat string, args ...any) Diagnostic {
	return Diagnostic{Severity: Warning, Address: address, Attribute: attribute, Summary: summary, Detail: fmt.Sprintf(detailFormat, args...)}
}
