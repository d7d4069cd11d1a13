package hclstack

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// A diagnostic's path is located at the deepest part the resource writes
// out: an attribute's value, a block (the first unless indexed), a tuple's
// item, an object's key; past what is written, at what holds it.
func TestLocateFindsTheDeepestWrittenPart(t *testing.T) {
	src := `resource "gpuslice_workload" "llm" {
  namespace = "team-a"
  slices    = { "v100-8gi" = 2, (local.other) = 1 }
  container {
    image   = "ollama/ollama:0.24.0"
    command = ["serve", "--port", 11434]
    env     = { MODE = "fast" }
    port {
      container_port = 11434
    }
    port {
      container_port = 8080
      name           = "metrics"
    }
  }
}
`
	f, hd := hclsyntax.ParseConfig([]byte(src), "main.tf", hcl.InitialPos)
	if hd.HasErrors() {
		t.Fatal(hd)
	}
	block := f.Body.(*hclsyntax.Body).Blocks[0]
	for _, tc := range []struct {
		path      string
		line, col int
	}{
		{"namespace", 2, 15},
		{`slices["v100-8gi"]`, 3, 17},
		{`slices["other"]`, 3, 15}, // a computed key: the object
		{"container.image", 5, 15},
		{"container[0].image", 5, 15},
		{"container.command[2]", 6, 35},
		{"container.command[7]", 6, 15},
		{`container.env["MODE"]`, 7, 17},
		{"container.image.tag", 5, 15}, // past an attribute's value
		{"container.port[1].name", 13, 24},
		{"container.port.name", 8, 5}, // the first port does not write it
		{"container.port[2].name", 4, 3},
		{"container.cpu_request", 4, 3},
		{"replicas", 1, 1},
		{"", 1, 1},
	} {
		got := locate(block.Body, block.DefRange(), tc.path)
		if got.Filename != "main.tf" || got.Start.Line != tc.line || got.Start.Column != tc.col {
			t.Errorf("%q located at %s:%d:%d, want main.tf:%d:%d", tc.path, got.Filename, got.Start.Line, got.Start.Column, tc.line, tc.col)
		}
	}
}
