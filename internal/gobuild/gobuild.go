// Package gobuild holds how the go commands that compile go-nvml are run,
// for the GNUmakefile and the tests that build binaries alike. go-nvml's
// cgo binds every version of each NVML function, including the ones nvml.h
// marks deprecated, and gcc warns of each call: a cold build printed
// hundreds of lines between the ones a person should read. Its CGO_CFLAGS
// (the file nvml-cgo-cflags, Go's default -O2 -g and the one warning off)
// go only to those commands, where the other cgo packages are the standard
// library's (TestFlagsReachOnlyGoNVML keeps it so).
package gobuild

import (
	_ "embed"
	"os"
	"strings"
)

//go:embed nvml-cgo-cflags
var nvmlCgoCFlags string

// NVMLCgoCFlags is the CGO_CFLAGS of a go command that compiles go-nvml.
func NVMLCgoCFlags() string { return strings.TrimSpace(nvmlCgoCFlags) }

// Env is the environment of a go command that compiles go-nvml: this
// process's, with NVMLCgoCFlags as CGO_CFLAGS.
func Env() []string {
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CGO_CFLAGS=") {
			env = append(env, kv)
		}
	}
	return append(env, "CGO_CFLAGS="+NVMLCgoCFlags())
}
