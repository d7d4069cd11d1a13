package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gpuslice/gpuslice"

// rule forbids the packages under from (a path in the module; the package
// itself and everything below it) to import anything under deny.
type rule struct {
	from string
	deny []string
	// direct checks only the packages' own imports: what they import may
	// legitimately use the denied package on their behalf (the engine's
	// clients serve the provider).
	direct bool
	why    string
}

// rules are the walls of ARCHITECTURE.md, section "What may import what".
// A path without a dot is in this module.
var rules = []rule{
	{from: "engine", deny: []string{"provider", "nodeplugin"},
		why: "the engine is the core both front ends call; what it shares with the node plugin lives in contract/"},
	{from: "nodeplugin", deny: []string{"engine", "provider"},
		why: "the node half knows the engine only through the names in contract/"},
	{from: "contract", deny: []string{""},
		why: "contract/ holds the names engine and node plugin agree on and depends on neither"},
	{from: "provider", deny: []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/dynamic"}, direct: true,
		why: "the provider provisions through the engine, never with clients of its own"},
	{from: "provider", deny: []string{"engine/hclstack"},
		why: "the provider decodes Terraform's values with engine/config; the .tf evaluator is the CLI's"},
	{from: "cmd/terraform-provider-gpuslice", deny: []string{"helm.sh/helm/v4/pkg/chart/common/util", "github.com/santhosh-tekuri/jsonschema"},
		why: "Terraform starts the provider three times per plan, and Helm's chartutil compiles JSON meta-schemas at init (deploy/values.go stands in for it)"},
	{from: "cmd", deny: []string{"acctest"},
		why: "acctest/ holds acceptance tests, which no binary links"},
	{from: "cmd/gpuslice", deny: []string{"internal/cluster", "internal/devcluster", "nodeplugin", "github.com/NVIDIA/go-nvml"},
		why: "the CLI users install plans and applies; the local cluster is gpuslice-dev's, GPUs are the node plugin's"},
}

// pkg is what go list says about one package: its own imports and
// everything it links (test files aside).
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func TestImportRules(t *testing.T) {
	pkgs, err := listModule()
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; is the test running inside the module?", len(pkgs))
	}
	for _, v := range violations(pkgs, rules) {
		t.Error(v)
	}
}

// A wall holds against a package that crosses it, directly or through
// another package, and lets the rest through.
func TestViolations(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: module + "/engine/render", Imports: []string{module + "/nodeplugin/shim"}, Deps: []string{module + "/nodeplugin/shim"}},
		{ImportPath: module + "/engine", Imports: []string{module + "/engine/render"}, Deps: []string{module + "/engine/render", module + "/nodeplugin/shim"}},
		{ImportPath: module + "/provider", Imports: []string{module + "/engine"}, Deps: []string{module + "/engine", "k8s.io/client-go/kubernetes"}},
		{ImportPath: module + "/provider/internal/x", Imports: []string{"k8s.io/client-go/kubernetes/typed/core/v1"}},
		{ImportPath: module + "/cmd/gpuslice-dev", Deps: []string{module + "/internal/devcluster"}},
		{ImportPath: module + "/cmd/gpuslice", Deps: []string{"github.com/NVIDIA/go-nvml/pkg/nvml"}},
	}
	got := violations(pkgs, rules)
	want := []string{
		"engine/render imports nodeplugin/shim",
		"engine imports nodeplugin/shim (through its imports)",
		"provider/internal/x imports k8s.io/client-go/kubernetes/typed/core/v1",
		"cmd/gpuslice imports github.com/NVIDIA/go-nvml/pkg/nvml (through its imports)",
	}
	if len(got) != len(want) {
		t.Fatalf("violations:\n%s\nwant %d, starting with:\n%s", strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]+":") {
			t.Errorf("violation %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
}

// violations lists, in package order, every import a rule forbids, with
// the rule's reason.
func violations(pkgs []pkg, rules []rule) []string {
	var out []string
	for _, p := range pkgs {
		for _, r := range rules {
			if !within(p.ImportPath, full(r.from)) {
				continue
			}
			imports := p.Deps
			if r.direct {
				imports = p.Imports
			}
			for _, imp := range imports {
				if within(imp, full(r.from)) {
					continue // a room may use its own packages
				}
				for _, d := range r.deny {
					if !within(imp, full(d)) {
						continue
					}
					how := ""
					if !slices.Contains(p.Imports, imp) {
						how = " (through its imports)"
					}
					out = append(out, fmt.Sprintf("%s imports %s%s: %s", short(p.ImportPath), short(imp), how, r.why))
				}
			}
		}
	}
	return out
}

// full turns a rule's path into an import path: one without a dot is in
// this module ("" is the whole module).
func full(p string) string {
	switch {
	case p == "":
		return module
	case strings.Contains(strings.SplitN(p, "/", 2)[0], "."):
		return p
	}
	return module + "/" + p
}

func short(p string) string { return strings.TrimPrefix(p, module+"/") }

// within reports whether path is prefix or a package below it.
func within(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// listModule runs go list on every package of the module.
func listModule() ([]pkg, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./... in %s: %w\n%s", root, err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("read go list's output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}
