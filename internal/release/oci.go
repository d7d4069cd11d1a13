package release

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OpenTofu's OCI provider artifacts (its oci_mirror installation method,
// OpenTofu 1.10 and later): a tag per version on an index manifest of
// artifact type "provider", listing one image manifest per platform of
// type "provider-target", whose one layer is the platform's zip, the same
// bytes as the signed release's.
const (
	ociIndexArtifactType   = "application/vnd.opentofu.provider"
	ociTargetArtifactType  = "application/vnd.opentofu.provider-target"
	ociPackageArtifactType = "application/vnd.opentofu.providerpkg"
	ociPackageMediaType    = "archive/zip"
	ociEmptyMediaType      = "application/vnd.oci.empty.v1+json"
)

// PushOCI pushes the provider zips of the release in dir to repository
// (registry/path, e.g. ghcr.io/acme/terraform-provider-gpuslice), tagged
// with the version, and returns the index's digest. OpenTofu finds it with
// oci_mirror { repository_template = "registry/path-before-${type}" }.
func PushOCI(ctx context.Context, dir, version, repository string, opts ...remote.Option) (v1.Hash, error) {
	repo, err := name.NewRepository(repository)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("OCI repository %q: %w", repository, err)
	}
	opts = append(opts, remote.WithContext(ctx))
	sums, err := ReadSums(filepath.Join(dir, ProviderSums(version)))
	if err != nil {
		return v1.Hash{}, err
	}
	empty := static.NewLayer([]byte("{}"), ociEmptyMediaType)
	if err := remote.WriteLayer(repo, empty, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push to %s: %w", repo, err)
	}
	emptyDesc, err := layerDescriptor(empty)
	if err != nil {
		return v1.Hash{}, err
	}
	emptyDesc.Data = []byte("{}")
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, ArtifactType: ociIndexArtifactType}
	for _, p := range Platforms {
		if _, ok := sums[ProviderZip(version, p)]; !ok {
			continue
		}
		desc, err := pushTarget(repo, filepath.Join(dir, ProviderZip(version, p)), emptyDesc, opts)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("push %s to %s: %w", ProviderZip(version, p), repo, err)
		}
		desc.Platform = &v1.Platform{OS: p.OS, Architecture: p.Arch}
		index.Manifests = append(index.Manifests, desc)
	}
	// OCI tags cannot hold the "+" of semver build metadata; OpenTofu
	// reads "_" in its place.
	tag := strings.ReplaceAll(version, "+", "_")
	desc, err := putManifest(repo, tag, index, index.MediaType, opts)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push the index of %s:%s: %w", repo, tag, err)
	}
	return desc.Digest, nil
}

// pushTarget pushes one platform's zip and its image manifest.
func pushTarget(repo name.Repository, zip string, config v1.Descriptor, opts []remote.Option) (v1.Descriptor, error) {
	data, err := os.ReadFile(zip)
	if err != nil {
		return v1.Descriptor{}, err
	}
	layer := static.NewLayer(data, ociPackageMediaType)
	if err := remote.WriteLayer(repo, layer, opts...); err != nil {
		return v1.Descriptor{}, err
	}
	layerDesc, err := layerDescriptor(layer)
	if err != nil {
		return v1.Descriptor{}, err
	}
	layerDesc.ArtifactType = ociPackageArtifactType
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: ociTargetArtifactType,
		Config: config, Layers: []v1.Descriptor{layerDesc}}
	desc, err := putManifest(repo, "", m, m.MediaType, opts)
	desc.ArtifactType = ociTargetArtifactType
	return desc, err
}

// putManifest stores a manifest under tag, or under its digest alone when
// tag is empty, and returns its descriptor.
func putManifest(repo name.Repository, tag string, m any, mt types.MediaType, opts []remote.Option) (v1.Descriptor, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return v1.Descriptor{}, err
	}
	digest, size, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		return v1.Descriptor{}, err
	}
	var ref name.Reference = repo.Digest(digest.String())
	if tag != "" {
		ref = repo.Tag(tag)
	}
	if err := remote.Put(ref, rawManifest{data, mt}, opts...); err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Size: size, Digest: digest}, nil
}

func layerDescriptor(l v1.Layer) (v1.Descriptor, error) {
	digest, err := l.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := l.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := l.MediaType()
	return v1.Descriptor{MediaType: mt, Size: size, Digest: digest}, err
}

// rawManifest is a manifest remote.Put sends as it is.
type rawManifest struct {
	data      []byte
	mediaType types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.data, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mediaType, nil }
