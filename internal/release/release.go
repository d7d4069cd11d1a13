// Package release makes gpuslice's releases in the format provider
// registries and OpenTofu's mirrors read: static binaries of the provider
// and the gpuslice CLI for every platform runners use, one zip per platform,
// the SHA256SUMS file with its detached OpenPGP signature, the registry
// manifest, a provider network mirror tree, and OpenTofu's OCI provider
// artifacts pushed to a registry.
//
// Everything but the signature is reproducible: the same source, Go
// toolchain and version give the same bytes (fixed build flags, no VCS
// stamp or build ID, zips with fixed times, modes and order).
package release

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/hashicorp/go-version"
)

// ProviderType is the provider's type name in its address (…/gpuslice/gpuslice).
const ProviderType = "gpuslice"

const (
	providerBinary = "terraform-provider-" + ProviderType
	cliBinary      = "gpuslice"
	// protocolVersion is the plugin protocol the provider serves (tf6server).
	protocolVersion = "6.0"
)

// Platform is a target as Go and OpenTofu name it (os_arch).
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "_" + p.Arch }

// exe is the suffix Windows needs on an executable's name.
func (p Platform) exe() string {
	if p.OS == "windows" {
		return ".exe"
	}
	return ""
}

// Platforms are the targets of a release: where runners, CI and people
// run OpenTofu and the CLI.
var Platforms = []Platform{
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"linux", "amd64"}, {"linux", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// Host is the platform this program runs on.
func Host() Platform { return Platform{runtime.GOOS, runtime.GOARCH} }

// ParsePlatforms reads a comma-separated list of os_arch names.
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for _, name := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(name), "_")
		if !ok || os == "" || arch == "" {
			return nil, fmt.Errorf("platform %q: want os_arch, e.g. linux_amd64", name)
		}
		out = append(out, Platform{os, arch})
	}
	return out, nil
}

// CheckVersion rejects what OpenTofu would not read as a provider version
// (x.y.z with an optional pre-release; no leading v, no build metadata,
// which OCI tags cannot carry).
func CheckVersion(v string) error {
	parsed, err := version.NewSemver(v)
	if err != nil || parsed.Original() != parsed.String() || parsed.Metadata() != "" {
		return fmt.Errorf("version %q: want x.y.z or x.y.z-pre (e.g. 0.2.0, 0.2.0-rc.1), without a leading v or +build metadata", v)
	}
	return nil
}

// Names of a release's files, as the registries expect them.

// ProviderZip is the provider's package for one platform.
func ProviderZip(v string, p Platform) string {
	return fmt.Sprintf("%s_%s_%s.zip", providerBinary, v, p)
}

// providerExecutable is the one file in a provider zip.
func providerExecutable(v string, p Platform) string {
	return providerBinary + "_v" + v + p.exe()
}

// ProviderSums is the checksum file the signature covers.
func ProviderSums(v string) string { return providerBinary + "_" + v + "_SHA256SUMS" }

// ProviderManifest is the registry manifest (plugin protocol versions).
func ProviderManifest(v string) string { return providerBinary + "_" + v + "_manifest.json" }

// CLIZip is the gpuslice CLI's archive for one platform.
func CLIZip(v string, p Platform) string { return fmt.Sprintf("%s_%s_%s.zip", cliBinary, v, p) }

// CLISums is the CLI archives' checksum file; apart from the provider's,
// whose every line OpenTofu records in lock files as the provider's hashes.
func CLISums(v string) string { return cliBinary + "_" + v + "_SHA256SUMS" }

// SignatureOf names the detached signature of a sums file.
func SignatureOf(sums string) string { return sums + ".sig" }
