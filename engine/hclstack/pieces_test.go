package hclstack

import (
	"fmt"
	"os"
	"path/filepath"
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
	bodies, diags, ok := parsePieces(src, "main.tf", ps)
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
	if _, _, ok := parsePieces(src, "main.tf", pieces(src, 1)); ok {
		t.Fatal("pieces cut inside a heredoc and a comment parsed: the test cuts nowhere wrong")
	}
	path := filepath.Join(t.TempDir(), "main.tf")
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	bodies, diags := parseFile(path)
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
