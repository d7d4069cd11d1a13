package hclstack

import (
	"bytes"
	"runtime"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// pieceSize is how much of a large .tf file is parsed at once. HCL's lexer
// holds every token of what it parses (about a hundred bytes each, a
// dozen a line), so a file of thousands of resources parsed whole peaks
// at tens of megabytes of tokens; in pieces of this size it holds a
// fraction of that, and the pieces parse on every core.
const pieceSize = 32 << 10

// parseFile parses one .tf file, src read from path, and hands each body
// it parses to read: one, or one per piece of a large file. The pieces
// are cut where a top-level block seems to start (pieces), and parsed a
// few at a time: read gets each body in the file's order and keeps what
// it needs of it, so the syntax trees of a file of thousands of resources
// are not all held at once. A cut that guessed wrong (inside a heredoc or
// a comment) leaves a piece that does not parse, and then the whole file
// is parsed again, so that its diagnostics are those of the file,
// whatever the pieces.
func parseFile[T any](src []byte, path string, read func(*hclsyntax.Body) T) ([]T, hcl.Diagnostics) {
	if ps := pieces(src, pieceSize); len(ps) > 1 {
		if out, diags, ok := parsePieces(src, path, ps, read); ok {
			return out, diags
		}
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if body, ok := f.Body.(*hclsyntax.Body); ok {
		return []T{read(body)}, diags
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

// parsePieces parses the pieces, as many at once as the process may run
// goroutines, and hands each body to read; ok is false when one does not
// parse on its own, and what read returned is then dropped.
func parsePieces[T any](src []byte, path string, ps []piece, read func(*hclsyntax.Body) T) ([]T, hcl.Diagnostics, bool) {
	out := make([]T, 0, len(ps))
	var all hcl.Diagnostics
	for window := range slices.Chunk(ps, runtime.GOMAXPROCS(0)) {
		got := make([]T, len(window))
		diags := make([]hcl.Diagnostics, len(window))
		ok := make([]bool, len(window))
		onEveryCore(len(window), func(i int) {
			f, d := hclsyntax.ParseConfig(src[window[i].start.Byte:window[i].end], path, window[i].start)
			diags[i] = d
			if body, isSyntax := f.Body.(*hclsyntax.Body); isSyntax && !d.HasErrors() {
				got[i], ok[i] = read(body), true
			}
		})
		for i := range window {
			if !ok[i] {
				return nil, nil, false
			}
			all = append(all, diags[i]...)
		}
		out = append(out, got...)
	}
	return out, all, true
}
