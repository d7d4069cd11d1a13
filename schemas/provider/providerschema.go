// Package providerschema keeps the Terraform provider's schema honest: it
// reads the schema as OpenTofu sees it (`tofu providers schema -json` on the
// provider `make install` builds, nothing downloaded), compares it with the
// snapshot checked in beside it (gpuslice.json) to find breaking changes,
// and feeds tfplugindocs.
package providerschema

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
)

// Address is the provider's source address, the key of its schema.
const Address = "registry.terraform.io/gpuslice/gpuslice"

// SnapshotFile is the checked-in snapshot, relative to the repository root.
const SnapshotFile = "schemas/provider/gpuslice.json"

// Dump builds and installs the provider from the repository at root into a
// filesystem mirror in a temporary directory, runs tofu init and `tofu
// providers schema -json` there, and returns the provider's schema alone,
// indented.
func Dump(ctx context.Context, root, tofu string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "gpuslice-schema-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	mirror, tfrc := filepath.Join(tmp, "mirror"), filepath.Join(tmp, "gpuslice.tfrc")
	if _, err := run(ctx, root, nil, "make", "-s", "install", "MIRROR="+mirror, "TFRC="+tfrc); err != nil {
		return nil, err
	}
	work := filepath.Join(tmp, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	main := `terraform {
  required_providers {
    gpuslice = { source = "` + Address + `" }
  }
}
`
	if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(main), 0o644); err != nil {
		return nil, err
	}
	env := []string{"TF_CLI_CONFIG_FILE=" + tfrc, "TF_IN_AUTOMATION=1"}
	if _, err := run(ctx, work, env, tofu, "init", "-input=false", "-no-color"); err != nil {
		return nil, err
	}
	out, err := run(ctx, work, env, tofu, "providers", "schema", "-json")
	if err != nil {
		return nil, err
	}
	var all tfjson.ProviderSchemas
	if err := json.Unmarshal(out, &all); err != nil {
		return nil, fmt.Errorf("parse tofu providers schema -json: %w", err)
	}
	ours, ok := all.Schemas[Address]
	if !ok {
		return nil, fmt.Errorf("tofu providers schema -json has no %s", Address)
	}
	return Encode(map[string]*tfjson.ProviderSchema{Address: ours}, all.FormatVersion)
}

// Encode writes schemas in the format of `tofu providers schema -json`,
// indented (map keys sorted, so the text is stable).
func Encode(schemas map[string]*tfjson.ProviderSchema, formatVersion string) ([]byte, error) {
	data, err := json.Marshal(tfjson.ProviderSchemas{FormatVersion: formatVersion, Schemas: schemas})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// ForDocs renames the schema's key to the provider's short name, the key
// tfplugindocs --providers-schema looks up.
func ForDocs(snapshot []byte) ([]byte, error) {
	var all tfjson.ProviderSchemas
	if err := json.Unmarshal(snapshot, &all); err != nil {
		return nil, err
	}
	ours, ok := all.Schemas[Address]
	if !ok {
		return nil, fmt.Errorf("the schema has no %s", Address)
	}
	return Encode(map[string]*tfjson.ProviderSchema{"gpuslice": ours}, all.FormatVersion)
}

func run(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out, nil
}

// Breaking lists the changes from old to new that break existing
// configurations or state: a resource, data source, attribute or block
// removed, an attribute's type or a block's nesting changed, an attribute
// newly required (or newly added as required), an argument made read-only.
func Breaking(oldJSON, newJSON []byte) ([]string, error) {
	var o, n tfjson.ProviderSchemas
	if err := json.Unmarshal(oldJSON, &o); err != nil {
		return nil, fmt.Errorf("parse the old schema: %w", err)
	}
	if err := json.Unmarshal(newJSON, &n); err != nil {
		return nil, fmt.Errorf("parse the new schema: %w", err)
	}
	var out []string
	for addr, os := range o.Schemas {
		ns, ok := n.Schemas[addr]
		if !ok {
			out = append(out, fmt.Sprintf("provider %s removed", addr))
			continue
		}
		if os.ConfigSchema != nil && ns.ConfigSchema != nil {
			out = append(out, blockChanges("provider", os.ConfigSchema.Block, ns.ConfigSchema.Block)...)
		}
		out = append(out, schemaMapChanges("resource", os.ResourceSchemas, ns.ResourceSchemas)...)
		out = append(out, schemaMapChanges("data source", os.DataSourceSchemas, ns.DataSourceSchemas)...)
	}
	sort.Strings(out)
	return out, nil
}

func schemaMapChanges(kind string, old, new map[string]*tfjson.Schema) []string {
	var out []string
	for name, os := range old {
		ns, ok := new[name]
		if !ok {
			out = append(out, fmt.Sprintf("%s %s removed", kind, name))
			continue
		}
		out = append(out, blockChanges(name, os.Block, ns.Block)...)
	}
	return out
}

func blockChanges(at string, old, new *tfjson.SchemaBlock) []string {
	if old == nil || new == nil {
		return nil
	}
	var out []string
	for name, oa := range old.Attributes {
		p := at + "." + name
		na, ok := new.Attributes[name]
		switch {
		case !ok:
			out = append(out, p+": attribute removed")
		case !oa.AttributeType.Equals(na.AttributeType):
			out = append(out, fmt.Sprintf("%s: type changed from %s to %s", p, oa.AttributeType.FriendlyName(), na.AttributeType.FriendlyName()))
		case !oa.Required && na.Required:
			out = append(out, p+": now required")
		case (oa.Optional || oa.Required) && !na.Optional && !na.Required:
			out = append(out, p+": no longer settable (computed only)")
		}
	}
	for name, na := range new.Attributes {
		if _, existed := old.Attributes[name]; !existed && na.Required {
			out = append(out, at+"."+name+": new required attribute")
		}
	}
	for name, ob := range old.NestedBlocks {
		p := at + "." + name
		nb, ok := new.NestedBlocks[name]
		switch {
		case !ok:
			out = append(out, p+": block removed")
		case ob.NestingMode != nb.NestingMode:
			out = append(out, fmt.Sprintf("%s: nesting changed from %s to %s", p, ob.NestingMode, nb.NestingMode))
		case nb.MinItems > ob.MinItems:
			out = append(out, fmt.Sprintf("%s: now needs at least %d", p, nb.MinItems))
		default:
			out = append(out, blockChanges(p, ob.Block, nb.Block)...)
		}
	}
	for name, nb := range new.NestedBlocks {
		if _, existed := old.NestedBlocks[name]; !existed && nb.MinItems > 0 {
			out = append(out, at+"."+name+": new required block")
		}
	}
	return out
}
