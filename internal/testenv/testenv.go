// Package testenv holds the one rule every test follows when the machine
// lacks what it needs (a built tool, gcc, root, writable cgroups): skip with
// the reason on a developer's machine, fail under CI=true, so a broken CI
// machine can never pass by skipping.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true, as CI services set it).
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable stops tb because something it needs is missing: a skip with
// the reason, or a failure in CI.
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	reason := fmt.Sprintf(format, args...)
	if InCI() {
		tb.Fatalf("%s (CI=true: a test that cannot run here fails instead of skipping)", reason)
	}
	tb.Skip(reason)
}

// UnavailableReason is Unavailable for code without a testing.TB (TestMain):
// it returns the reason to skip with, or exits non-zero in CI.
func UnavailableReason(format string, args ...any) string {
	reason := fmt.Sprintf(format, args...)
	if InCI() {
		fmt.Fprintf(os.Stderr, "%s (CI=true: a test that cannot run here fails instead of skipping)\n", reason)
		os.Exit(1)
	}
	return reason
}
