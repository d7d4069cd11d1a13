package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Builder compiles the release's binaries with the go command.
type Builder struct {
	// ModuleDir is the root of the gpuslice module.
	ModuleDir string
	// Version is stamped into both binaries (main.version).
	Version string
}

// Binaries are one platform's built executables.
type Binaries struct{ Provider, CLI string }

// Build compiles the provider and the CLI for p into dir.
func (b Builder) Build(ctx context.Context, p Platform, dir string) (Binaries, error) {
	out := Binaries{
		Provider: filepath.Join(dir, p.String(), providerBinary+p.exe()),
		CLI:      filepath.Join(dir, p.String(), cliBinary+p.exe()),
	}
	if err := b.goBuild(ctx, p, "./cmd/terraform-provider-gpuslice", out.Provider); err != nil {
		return Binaries{}, err
	}
	if err := b.goBuild(ctx, p, "./cmd/gpuslice", out.CLI); err != nil {
		return Binaries{}, err
	}
	return out, nil
}

// goBuild builds pkg as a static binary whose bytes depend only on the
// source, the toolchain and the version: no cgo (runners' images may have
// no libc), no paths of this machine (-trimpath), no VCS stamp or build ID,
// and the default micro-architecture level whatever the environment asks.
func (b Builder) goBuild(ctx context.Context, p Platform, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+b.Version, "-o", out, pkg)
	cmd.Dir = b.ModuleDir
	cmd.Env = append(os.Environ(), "GOOS="+p.OS, "GOARCH="+p.Arch, "CGO_ENABLED=0",
		"GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", pkg, p, err, stderr.Bytes())
	}
	return nil
}
