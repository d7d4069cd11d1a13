package release

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// Options say what Make builds and where.
type Options struct {
	ModuleDir string
	Version   string
	// Address is the provider's source address (host/namespace/type) the
	// network mirror tree is laid out for.
	Address   string
	Platforms []Platform
	// Out is the release directory; it must be new or empty.
	Out    string
	Signer *Signer
}

// Make builds and packages a release into opts.Out.
func Make(ctx context.Context, opts Options) error {
	if err := CheckVersion(opts.Version); err != nil {
		return err
	}
	if entries, err := os.ReadDir(opts.Out); err == nil && len(entries) > 0 {
		return fmt.Errorf("release directory %s is not empty: remove it first (make release does)", opts.Out)
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp(filepath.Dir(opts.Out), ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b := Builder{ModuleDir: opts.ModuleDir, Version: opts.Version}
	built := map[Platform]Binaries{}
	for _, p := range opts.Platforms {
		if built[p], err = b.Build(ctx, p, work); err != nil {
			return err
		}
	}
	if err := Package(opts.Out, opts.Version, built, opts.Signer); err != nil {
		return err
	}
	return WriteNetworkMirror(opts.Out, opts.Version, opts.Address)
}

// Package writes the registry's files into dir from built binaries: a zip
// per platform of the provider and of the CLI, the manifest, and each
// sums file with its signature.
func Package(dir, version string, built map[Platform]Binaries, signer *Signer) error {
	platforms := slices.SortedFunc(maps.Keys(built), func(a, b Platform) int { return cmp.Compare(a.String(), b.String()) })
	var providerFiles, cliFiles []string
	for _, p := range platforms {
		zip, cli := ProviderZip(version, p), CLIZip(version, p)
		if err := writeZip(filepath.Join(dir, zip), providerExecutable(version, p), built[p].Provider); err != nil {
			return err
		}
		if err := writeZip(filepath.Join(dir, cli), cliBinary+p.exe(), built[p].CLI); err != nil {
			return err
		}
		providerFiles, cliFiles = append(providerFiles, zip), append(cliFiles, cli)
	}
	// The registries' release tooling lists the manifest in the sums too.
	if err := writeManifest(filepath.Join(dir, ProviderManifest(version))); err != nil {
		return err
	}
	providerFiles = append(providerFiles, ProviderManifest(version))
	for sums, files := range map[string][]string{ProviderSums(version): providerFiles, CLISums(version): cliFiles} {
		if err := writeSums(dir, sums, files); err != nil {
			return err
		}
		if err := signer.signFile(filepath.Join(dir, sums)); err != nil {
			return err
		}
	}
	return nil
}

// writeManifest writes the registry manifest: the plugin protocol
// versions the provider serves, which registries read at publication.
func writeManifest(path string) error {
	type metadata struct {
		ProtocolVersions []string `json:"protocol_versions"`
	}
	data, err := json.MarshalIndent(struct {
		Version  int      `json:"version"`
		Metadata metadata `json:"metadata"`
	}{1, metadata{[]string{protocolVersion}}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
