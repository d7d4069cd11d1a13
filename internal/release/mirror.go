package release

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/dirhash"
)

// MirrorDir is the network mirror tree inside a release directory: serve
// it at any HTTPS URL and point OpenTofu's network_mirror at that URL.
const MirrorDir = "mirror"

// WriteNetworkMirror lays the release's provider zips out in dir/mirror as
// the Provider Network Mirror Protocol reads them:
// <host>/<namespace>/<type>/index.json, <version>.json and the zips (hard
// links to the release's). Each archive carries both hashes OpenTofu
// records: h1: of the package's contents and zh: of the zip, the latter
// being the line of the signed sums file.
func WriteNetworkMirror(dir, version, address string) error {
	parts := strings.Split(address, "/")
	if len(parts) != 3 || parts[2] != ProviderType {
		return fmt.Errorf("provider address %q: want host/namespace/%s", address, ProviderType)
	}
	sums, err := ReadSums(filepath.Join(dir, ProviderSums(version)))
	if err != nil {
		return err
	}
	target := filepath.Join(dir, MirrorDir, filepath.FromSlash(address))
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	type archive struct {
		URL    string   `json:"url"`
		Hashes []string `json:"hashes"`
	}
	archives := map[string]archive{}
	for _, p := range Platforms {
		zip := ProviderZip(version, p)
		sum, ok := sums[zip]
		if !ok {
			continue
		}
		h1, err := dirhash.HashZip(filepath.Join(dir, zip), dirhash.Hash1)
		if err != nil {
			return fmt.Errorf("h1 hash of %s: %w", zip, err)
		}
		if err := os.Link(filepath.Join(dir, zip), filepath.Join(target, zip)); err != nil {
			return fmt.Errorf("network mirror: %w", err)
		}
		archives[p.String()] = archive{URL: zip, Hashes: []string{h1, "zh:" + sum}}
	}
	if len(archives) == 0 {
		return fmt.Errorf("%s lists no provider zip of a known platform", ProviderSums(version))
	}
	if err := writeJSON(filepath.Join(target, version+".json"), map[string]any{"archives": archives}); err != nil {
		return err
	}
	return writeJSON(filepath.Join(target, "index.json"), map[string]any{"versions": map[string]any{version: struct{}{}}})
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
