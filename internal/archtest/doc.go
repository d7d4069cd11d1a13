// Package archtest keeps ARCHITECTURE.md true: its test lists every
// package of the module with `go list` and fails when one imports across
// a wall the document draws (the engine reaching into the provider or the
// node plugin, the provider provisioning with its own Kubernetes clients,
// a command linking the test harness or the local cluster). It also
// holds every non-test Go file to 450 lines and every function to 80.
package archtest
