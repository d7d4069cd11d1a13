// Package testenv is where every test skip goes, so that the two kinds
// stay apart:
//
//   - Unavailable: the machine lacks what the test needs (a built tool,
//     gcc, root, unshare, writable cgroups). Skip with the reason on a
//     developer's machine, fail under CI=true, so a broken CI machine can
//     never pass by skipping.
//   - Short and Chosen: the person running chose to leave the test out
//     (go test -short; KUBE_CONFIG_PATH pointing the provider's tests at
//     their own cluster). These skip everywhere, CI included: nothing is
//     missing.
//
// No test calls t.Skip itself (TestSkipsGoThroughTestenv checks).
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

// Short skips tb under go test -short, saying why it is left out (it is
// slow, or needs the local control plane).
func Short(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip(why + "; run without -short")
	}
}

// Chosen skips tb because of a choice of the person running it, never of
// something missing: e.g. a test that changes cluster-wide settings is
// not run on a user's own cluster (KUBE_CONFIG_PATH).
func Chosen(tb testing.TB, format string, args ...any) {
	tb.Helper()
	tb.Skipf(format, args...)
}
