package hclstack

import (
	"bytes"
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// pieceSize is how much of a large .tf file is parsed at once. HCL's lexer
// holds every token of what it parses (about a hundred bytes each, a
// dozen a line), so a file of thousands of resources parsed whole peaks
// at tens of megabytes of tokens; in pieces of this size it holds a
// fraction of that, and the pieces parse on every core.
const pieceSize = 32 << 10

// parseFile parses one .tf file into its bodies: one, or one per piece of
// a large file. The pieces are cut where a top-level block seems to start
// (pieces); a cut that guessed wrong (inside a
// heredoc or a comment) leaves a piece that does not parse, and then the
// whole file is parsed again, so that its diagnostics are those of the
// file, whatever the pieces.
func parseFile(path string) ([]*hclsyntax.Body, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Failed to read file",
			Detail: fmt.Sprintf("The configuration file %q could not be read: %v.", path, err)}}
	}
	if ps := pieces(src, pieceSize); len(ps) > 1 {
		if bodies, diags, ok := parsePieces(src, path, ps); ok {
			return bodies, diags
		}
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if body, ok := f.Body.(*hclsyntax.Body); ok {
		return []*hclsyntax.Body{body}, diags
	}
	return nil, diags
}

// piece is where one piece of a file starts, and its end.
type piece struct {
	start hcl.Pos
	end   int
}

// pieces cuts src into pieces of at least size bytes at top-level block
// boundaries (a line starting with a letter after a line holding only
// "}", blank lines and line comments between them); one piece when it
// finds none.
func pieces(src []byte, size int) []piece {
	var out []piece
	start := hcl.InitialPos
	line, prevClose := 1, false
	for off := 0; off < len(src); {
		nl := bytes.IndexByte(src[off:], '\n')
		end := len(src)
		if nl >= 0 {
			end = off + nl + 1
		}
		text := src[off:end]
		trimmed := bytes.TrimRight(text, " \t\r\n")
		switch {
		case prevClose && off-start.Byte >= size && isLetter(text[0]):
			out = append(out, piece{start: start, end: off})
			start = hcl.Pos{Line: line, Column: 1, Byte: off}
			prevClose = false
		case len(trimmed) == 0 || trimmed[0] == '#' || bytes.HasPrefix(trimmed, []byte("//")):
			// blank lines and comments between blocks
		default:
			prevClose = string(trimmed) == "}"
		}
		off, line = end, line+1
	}
	return append(out, piece{start: start, end: len(src)})
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// parsePieces parses the pieces on as many goroutines as the process may
// run at once; ok is false when one does not parse on its own.
func parsePieces(src []byte, path string, ps []piece) ([]*hclsyntax.Body, hcl.Diagnostics, bool) {
	bodies := make([]*hclsyntax.Body, len(ps))
	diags := make([]hcl.Diagnostics, len(ps))
	onEveryCore(len(ps), func(i int) {
		f, d := hclsyntax.ParseConfig(src[ps[i].start.Byte:ps[i].end], path, ps[i].start)
		bodies[i], _ = f.Body.(*hclsyntax.Body)
		diags[i] = d
	})
	var all hcl.Diagnostics
	for i, d := range diags {
		if d.HasErrors() || bodies[i] == nil {
			return nil, nil, false
		}
		all = append(all, d...)
	}
	return bodies, all, true
}
