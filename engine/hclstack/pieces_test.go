package hclstack

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// A file parsed in pieces has the blocks, attributes and positions of the
// file parsed whole.
func TestPiecesParseAsTheWholeFile(t *testing.T) {
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "# workload %d\nresource \"gpuslice_workload\" \"w%d\" {\n  name = \"w%d\"\n  container {\n    image = \"x:%d\"\n  }\n}\n\n", i, i, i, i)
	}
	src := []byte(b.String())
	ps := pieces(src, 100)
	if len(ps) < 20 {
		t.Fatalf("%d pieces of a file of 40 blocks cut every 100 bytes", len(ps))
	}
	bodies, diags, ok := parsePieces(src, "main.tf", ps, keepBody)
	if !ok || diags.HasErrors() {
		t.Fatalf("pieces did not parse: %v", diags)
	}
	whole, _ := hclsyntax.ParseConfig(src, "main.tf", hcl.InitialPos)
	var want, got []string
	describe := func(out *[]string, body *hclsyntax.Body) {
		for _, blk := range body.Blocks {
			*out = append(*out, fmt.Sprint(blk.Labels, blk.DefRange(), blk.Body.Attributes["name"].Expr.Range(), blk.Body.Blocks[0].Body.Attributes["image"].SrcRange))
		}
	}
	describe(&want, whole.Body.(*hclsyntax.Body))
	for _, body := range bodies {
		describe(&got, body)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("pieces:\n%s\nwhole file:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A cut guessed inside a heredoc or a comment leaves a piece that does not
// parse: the file is parsed whole, and the heredoc keeps its text.
func TestPiecesFallBackToTheWholeFile(t *testing.T) {
	inside := "}\nresource \"gpuslice_workload\" \"fake\" {\n"
	var b strings.Builder
	for i := range 2 * pieceSize / 60 {
		fmt.Fprintf(&b, "resource \"gpuslice_package\" \"p%d\" {\n  name = \"p%d\"\n}\n", i, i)
	}
	b.WriteString("locals {\n  script = <<EOT\n" + strings.Repeat(strings.Repeat("x", 1023)+"\n", pieceSize/1024+1) + inside + "EOT\n}\n/*\n" + inside + "*/\n")
	for i := range pieceSize / 60 {
		fmt.Fprintf(&b, "resource \"gpuslice_package\" \"q%d\" {\n  name = \"q%d\"\n}\n", i, i)
	}
	src := []byte(b.String())
	if _, _, ok := parsePieces(src, "main.tf", pieces(src, 1), keepBody); ok {
		t.Fatal("pieces cut inside a heredoc and a comment parsed: the test cuts nowhere wrong")
	}
	bodies, diags := parseFile(src, "main.tf", keepBody)
	if diags.HasErrors() || len(bodies) == 0 {
		t.Fatalf("parseFile: %v", diags)
	}
	blocks := 0
	var script string
	for _, body := range bodies {
		for _, blk := range body.Blocks {
			blocks++
			if blk.Type == "locals" {
				v, _ := blk.Body.Attributes["script"].Expr.Value(nil)
				script = v.AsString()
			}
		}
	}
	if want := 2*pieceSize/60 + 1 + pieceSize/60; blocks != want || !strings.HasSuffix(script, inside) {
		t.Errorf("%d blocks (want %d), heredoc ends %q", blocks, want, script[max(0, len(script)-60):])
	}
}

func keepBody(b *hclsyntax.Body) *hclsyntax.Body { return b }

// What a large file declares holds its text and where each resource
// refers, not the syntax trees of its pieces: parsed, a file of thousands
// of workloads holds a few times its size (its syntax trees, twenty).
func TestParsedFileHoldsNoSyntaxTrees(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("resource \"gpuslice_package\" \"p\" {\n  name      = \"p\"\n  gpu_model = \"Tesla V100-PCIE-32GB\"\n  fraction  = 25\n}\n\n")
	for i := range 2000 {
		fmt.Fprintf(&b, workloadBlock, i, i%10, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	held := func(f func() any) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		kept := f()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(kept)
		return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
	}
	size := uint64(b.Len())
	declared := held(func() any {
		f, diags := parseDir(dir)
		if diags.HasErrors() {
			t.Fatalf("parse: %v", diags.Err())
		}
		return f
	})
	trees := held(func() any {
		bodies, _ := parseFile([]byte(b.String()), "main.tf", keepBody)
		return bodies
	})
	t.Logf("a file of %d KiB: %d KiB declared, %d KiB of syntax trees", size>>10, declared>>10, trees>>10)
	if declared > 6*size || declared > trees/2 {
		t.Errorf("what a file of %d KiB declares holds %d KiB, its syntax trees %d KiB: the declarations keep the trees", size>>10, declared>>10, trees>>10)
	}
}

const workloadBlock = `resource "gpuslice_workload" "w%d" {
  namespace = "ns%d"
  name      = "w%d"
  package   = gpuslice_package.p.name
  replicas  = 0
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    env            = { OLLAMA_CONTEXT_LENGTH = "4096" }
    port {
      container_port = 11434
      name           = "http"
    }
  }
}

`
