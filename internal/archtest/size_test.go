package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A file holds one job and a function reads as one step: past these sizes
// they mix concepts that want names of their own. Test code is exempt, as
// a table of cases is long by nature.
const (
	maxFileLines = 450
	maxFuncLines = 80 // from `func` to its closing brace
)

func TestSizeRules(t *testing.T) {
	root, files, err := sourceFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("go list found %d source files; is the test running inside the module?", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		vs, err := sizeViolations(filepath.ToSlash(rel), src)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			t.Error(v)
		}
	}
}

// The rules catch a file or function one line over the limit and let one
// at the limit through.
func TestSizeViolations(t *testing.T) {
	body := func(n int) string { // a function of n lines
		return "func f() {\n" + strings.Repeat("\t_ = 0\n", n-2) + "}\n"
	}
	long := "package p\n\n" + body(maxFuncLines+1)
	atLimit := "package p\n\n" + body(maxFuncLines)
	pad := func(src string, lines int) string {
		return src + strings.Repeat("\n", lines-strings.Count(src, "\n"))
	}
	method := "package p\n\ntype T struct{}\n\nfunc (T) m() {\n" + strings.Repeat("\t_ = 0\n", maxFuncLines-1) + "}\n"
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"function at the limit", atLimit, nil},
		{"function over it", long, []string{fmt.Sprintf("x.go:3: func f is %d lines", maxFuncLines+1)}},
		{"method over it", method, []string{fmt.Sprintf("x.go:5: func T.m is %d lines", maxFuncLines+1)}},
		{"file at the limit", pad(atLimit, maxFileLines), nil},
		{"file over it", pad(atLimit, maxFileLines+1), []string{fmt.Sprintf("x.go is %d lines", maxFileLines+1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := sizeViolations("x.go", []byte(c.src))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("violations %q, want ones starting with %q", got, c.want)
			}
			for i := range c.want {
				if !strings.HasPrefix(got[i], c.want[i]+" ") {
					t.Errorf("violation %q, want it to start with %q", got[i], c.want[i])
				}
			}
		})
	}
}

// sizeViolations lists what of one source file (named name) is over the
// limits: the file, then each function in file order.
func sizeViolations(name string, src []byte) ([]string, error) {
	var out []string
	lines := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		lines++
	}
	if lines > maxFileLines {
		out = append(out, fmt.Sprintf("%s is %d lines (at most %d): split it by the concepts it mixes, one file each, named after what it holds",
			name, lines, maxFileLines))
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		if n := end.Line - start.Line + 1; n > maxFuncLines {
			out = append(out, fmt.Sprintf("%s:%d: func %s is %d lines (at most %d): take it apart into steps with names",
				name, start.Line, funcName(fd), n, maxFuncLines))
		}
	}
	return out, nil
}

// funcName is a function's name, a method's with its receiver's type.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// sourceFiles lists the module's non-test Go files, those of every build
// (files other platforms or tags build included), with the module's root.
func sourceFiles() (string, []string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "list", "-e", "-json=Dir,GoFiles,CgoFiles,IgnoredGoFiles", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("go list ./... in %s: %w\n%s", root, err, stderr.String())
	}
	var files []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Dir                               string
			GoFiles, CgoFiles, IgnoredGoFiles []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return root, files, nil
		} else if err != nil {
			return "", nil, fmt.Errorf("read go list's output: %w", err)
		}
		for _, names := range [][]string{p.GoFiles, p.CgoFiles, p.IgnoredGoFiles} {
			for _, n := range names {
				if !strings.HasSuffix(n, "_test.go") {
					files = append(files, filepath.Join(p.Dir, n))
				}
			}
		}
	}
}
