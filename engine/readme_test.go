package engine_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/redistest"
)

// TestReadmeGoSnippets holds every ```go block of README.md to a compiled, tested example:
// the line before it is a marker
//
//	<!-- example: FILE -->       the block is FILE, whole
//	<!-- example: FILE FUNC -->  the block is the body of function FUNC in FILE, less one
//	                             tab of indentation
//
// FILE relative to the repository's root, its "../policies/" read as the README's
// "policies/" (the README's commands run at the root). The Examples run with go test.
func TestReadmeGoSnippets(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile(`^<!-- example: (\S+)(?: (\w+))? -->$`)
	lines := strings.Split(string(readme), "\n")
	n := 0
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```go" {
			continue
		}
		start := i + 1
		var block strings.Builder
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			block.WriteString(lines[i] + "\n")
		}
		n++
		m := marker.FindStringSubmatch(lines[max(start-2, 0)])
		if m == nil {
			t.Errorf("README.md:%d: a ```go block without an <!-- example: FILE [FUNC] --> marker before it", start)
			continue
		}
		want := exampleText(t, filepath.Join("..", m[1]), m[2])
		if got := block.String(); got != want {
			t.Errorf("README.md:%d: the go block is not %s %s:\n--- README.md\n%s--- %s\n%s", start, m[1], m[2], got, m[1], want)
		}
	}
	if n < 2 {
		t.Errorf("README.md has %d go blocks; want the Embed in Go and HTTP middleware ones", n)
	}
}

// exampleText is what the README quotes of path: the whole file when fn is "", else the
// body of function fn less one tab; "../policies/" reads as "policies/".
func exampleText(t *testing.T, path, fn string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	if fn != "" {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		text = ""
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn && fd.Recv == nil {
				body := src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset]
				for _, l := range strings.SplitAfter(strings.TrimPrefix(string(body), "\n"), "\n") {
					text += strings.TrimPrefix(l, "\t")
				}
			}
		}
		if text == "" {
			t.Fatalf("%s has no function %s", path, fn)
		}
	}
	return strings.ReplaceAll(text, `"../policies/`, `"policies/`)
}

// The README's program with a Redis address: its client options work on a real server,
// and the decisions are the Example's.
func TestExampleEmbedOnRedis(t *testing.T) {
	e, closeEngine := newEngine("../policies/uploads.hcl", redistest.Shared(t).Addr())
	defer closeEngine()
	ctx := context.Background()
	upload := engine.Attrs{"method": "POST", "path": "/upload", "user": t.Name(), "content_length": "5242880"}
	var got []bool
	var held []*engine.Decision
	defer func() {
		for _, d := range held {
			e.Release(ctx, d)
		}
	}()
	allow := func() {
		d, err := e.Allow(ctx, upload)
		if err != nil {
			t.Fatal(err)
		}
		if d.Source != engine.FromBackend {
			t.Fatalf("decided by %v (%v), not by Redis", d.Source, d.Err)
		}
		got = append(got, d.Allowed)
		held = append(held, d)
	}
	for range 4 {
		allow()
	}
	e.Release(ctx, held[0])
	allow()
	if want := []bool{true, true, true, false, true}; !slices.Equal(got, want) {
		t.Errorf("on Redis: %v; want %v (the Example's)", got, want)
	}
}
