// Command gpuslice-release makes a gpuslice release (make release): the
// provider's and the CLI's static binaries for every platform, packaged
// and signed in the registries' format with a provider network mirror
// tree, and pushes the provider to an OCI registry for OpenTofu's
// oci_mirror (make release-oci). It is the maintainers' tool, apart from
// the gpuslice CLI users install.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gpuslice/gpuslice/internal/release"
)

const usage = `usage:
  gpuslice-release build -version X.Y.Z -address HOST/NAMESPACE/gpuslice -out DIR [-platforms os_arch,...]
  gpuslice-release push-oci -version X.Y.Z -dir DIR -repository REGISTRY/PATH`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gpuslice-release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no command\n%s", usage)
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:])
	case "push-oci":
		return pushOCI(ctx, args[1:])
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

func build(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	opts := release.Options{ModuleDir: "."}
	fs.StringVar(&opts.Version, "version", "", "the release's version, x.y.z")
	fs.StringVar(&opts.Address, "address", "", "the provider's source address the network mirror serves")
	fs.StringVar(&opts.Out, "out", "", "the release directory (new or empty)")
	platforms := fs.String("platforms", "", "os_arch,... to build (default: every release platform)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if opts.Version == "" || opts.Address == "" || opts.Out == "" {
		return fmt.Errorf("build needs -version, -address and -out\n%s", usage)
	}
	opts.Platforms = release.Platforms
	if *platforms != "" {
		var err error
		if opts.Platforms, err = release.ParsePlatforms(*platforms); err != nil {
			return err
		}
	}
	signer, err := release.SignerFromEnv()
	if err != nil {
		return err
	}
	opts.Signer = signer
	start := time.Now()
	if err := release.Make(ctx, opts); err != nil {
		return err
	}
	names := make([]string, len(opts.Platforms))
	for i, p := range opts.Platforms {
		names[i] = p.String()
	}
	fmt.Printf("release %s for %s in %s (%s), sums signed with key %s\n",
		opts.Version, strings.Join(names, " "), opts.Out, time.Since(start).Round(time.Second), signer.KeyID())
	return nil
}

func pushOCI(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push-oci", flag.ContinueOnError)
	version := fs.String("version", "", "the release's version")
	dir := fs.String("dir", "", "the release directory make release wrote")
	repository := fs.String("repository", "", "registry/path to push to (credentials from Docker's config, as docker login writes them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || *dir == "" || *repository == "" {
		return fmt.Errorf("push-oci needs -version, -dir and -repository\n%s", usage)
	}
	digest, err := release.PushOCI(ctx, *dir, *version, *repository, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s:%s (%s)\n", *repository, *version, digest)
	return nil
}
