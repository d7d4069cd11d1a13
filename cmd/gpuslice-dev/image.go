package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/spf13/cobra"

	"github.com/gpuslice/gpuslice/internal/images"
)

// newImageCommand builds and pushes the node plugin's image (make image,
// make image-push): in Go, without Docker.
func newImageCommand() *cobra.Command {
	var dir string
	image := &cobra.Command{Use: "image", Short: "Build or push the node plugin's OCI image (what `make image` and `make image-push` run)"}
	image.PersistentFlags().StringVar(&dir, "dir", filepath.Join("bin", "image"), "directory holding what `make image` built, and the image it writes")

	var version, revision, caFile string
	build := &cobra.Command{
		Use: "build",
		Short: "Build the node plugin's image from <dir>/gpuslice-nodeplugin and <dir>/shim/libgpuslice.so into <dir>/oci and <dir>/gpuslice-nodeplugin.tar, " +
			"and the in-cluster reconciler's from <dir>/gpuslice (static) into <dir>/reconcile/oci and <dir>/gpuslice-reconcile.tar",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			img, err := images.NodePluginImage(dir, version, revision)
			if err != nil {
				return err
			}
			if err := writeImage(cmd, img, filepath.Join(dir, "oci"), filepath.Join(dir, "gpuslice-nodeplugin.tar"), images.NodePluginRepository+":"+version); err != nil {
				return err
			}
			img, err = images.ReconcileImage(dir, caFile, version, revision)
			if err != nil {
				return err
			}
			return writeImage(cmd, img, filepath.Join(dir, "reconcile", "oci"), filepath.Join(dir, "gpuslice-reconcile.tar"), images.ReconcileRepository+":"+version)
		},
	}
	build.Flags().StringVar(&version, "version", "0.1.0", "version (the tag and org.opencontainers.image.version)")
	build.Flags().StringVar(&revision, "revision", "unknown", "source revision (org.opencontainers.image.revision)")
	build.Flags().StringVar(&caFile, "ca-file", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates the reconciler's image trusts for cloning over https")

	var reconcile bool
	push := &cobra.Command{
		Use:   "push IMAGE",
		Short: "Push the image built in <dir>/oci (with -reconcile, <dir>/reconcile/oci) to IMAGE (registry/repository:tag), with the Docker credential chain (~/.docker/config.json, credential helpers)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := name.ParseReference(args[0])
			if err != nil {
				return fmt.Errorf("IMAGE %q: %w (want registry/repository:tag)", args[0], err)
			}
			img, err := images.BuiltNodePluginImage(filepath.Join(dir, "oci"))
			if reconcile {
				img, err = images.Built(filepath.Join(dir, "reconcile", "oci"), "the reconciler's image")
			}
			if err != nil {
				return err
			}
			digest, err := img.Digest()
			if err != nil {
				return err
			}
			if err := remote.Write(ref, img, remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithContext(cmd.Context())); err != nil {
				return fmt.Errorf("push %s: %w", ref, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pushed %s@%s\n", ref.Context().Name()+":"+ref.Identifier(), digest)
			return nil
		},
	}
	push.Flags().BoolVar(&reconcile, "reconcile", false, "push the in-cluster reconciler's image instead of the node plugin's")
	image.AddCommand(build, push)
	return image
}

// writeImage writes img as an OCI layout into ociDir and a tarball tagged
// tag, and prints its digest.
func writeImage(cmd *cobra.Command, img v1.Image, ociDir, tarPath, tag string) error {
	if err := os.RemoveAll(ociDir); err != nil {
		return err
	}
	p, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img); err != nil {
		return fmt.Errorf("write %s: %w", ociDir, err)
	}
	t, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(tarPath, t, img); err != nil {
		return fmt.Errorf("write %s: %w", tarPath, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	size, err := imageSize(img)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s@%s (%.1f MB compressed)\n  OCI layout: %s\n  tarball:    %s\n", t, digest, float64(size)/1e6, ociDir, tarPath)
	return nil
}

func imageSize(img interface {
	Manifest() (*v1.Manifest, error)
}) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	size := m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return size, nil
}
