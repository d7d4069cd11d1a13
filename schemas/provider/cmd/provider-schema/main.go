// Command provider-schema writes the provider's schema as OpenTofu reports
// it: the checked-in snapshot (-write, for `make schema`) and the input of
// tfplugindocs (-docs-input, for `make docs`). Run it from the repository
// root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	providerschema "github.com/gpuslice/gpuslice/schemas/provider"
)

func main() {
	tofu := flag.String("tofu", "bin/tofu", "OpenTofu binary")
	write := flag.String("write", "", "write the snapshot to this file")
	docs := flag.String("docs-input", "", "write the schema, keyed for tfplugindocs --providers-schema, to this file")
	flag.Parse()
	if err := run(*tofu, *write, *docs); err != nil {
		fmt.Fprintln(os.Stderr, "provider-schema:", err)
		os.Exit(1)
	}
}

func run(tofu, write, docs string) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	snapshot, err := providerschema.Dump(context.Background(), root, tofu)
	if err != nil {
		return err
	}
	if write != "" {
		if err := os.WriteFile(write, snapshot, 0o644); err != nil {
			return err
		}
	}
	if docs != "" {
		data, err := providerschema.ForDocs(snapshot)
		if err != nil {
			return err
		}
		return os.WriteFile(docs, data, 0o644)
	}
	return nil
}
