package dsl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

func TestRender(t *testing.T) {
	if os.Getenv("CASE") == "" {
		t.Skip()
	}
	a, _ := txtar.ParseFile(filepath.Join("testdata/diagnostics", os.Getenv("CASE")+".txtar"))
	files := map[string][]byte{}
	for _, f := range a.Files {
		if f.Name != "diags" {
			files[f.Name] = f.Data
		}
	}
	cfg, diags := Parse(files)
	WriteDiagnostics(os.Stdout, cfg.Files, diags, 110, false)
}
