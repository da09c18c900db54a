package playground

import (
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/rlctl/rlctl"
	"github.com/rlctl/rlctl/dsl"
)

// Example is one of the repository's example policies.
type Example struct {
	Name string `json:"name"` // the policy file's name without .hcl: "login"
	// Files are the policy file and the plugin sources it names, by their names relative
	// to policies/ ("simple_gcra.hcl", "plugins/simple_gcra.lua"): what rlctl reads for
	// rlctl validate simple_gcra.hcl run in policies/.
	Files map[string]string `json:"files"`
}

// Examples returns each policies/*.hcl of the repository with the Lua files it names,
// sorted by name; the caller owns the result.
func Examples() []Example {
	dir, err := fs.Sub(rlctl.Policies, "policies")
	if err != nil {
		panic(err) // the embed pattern names the directory
	}
	var names []string
	aux := map[string][]byte{}
	_ = fs.WalkDir(dir, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if path.Dir(name) == "." && strings.HasSuffix(name, ".hcl") {
			names = append(names, name)
		} else if !strings.HasSuffix(name, ".hcl") && !strings.HasSuffix(name, ".json") {
			aux[name], err = fs.ReadFile(dir, name)
		}
		return err
	})
	var out []Example
	for _, name := range names {
		src, _ := fs.ReadFile(dir, name)
		files := map[string][]byte{name: src}
		for n, b := range aux {
			files[n] = b
		}
		// The files a policy names are those Parse reads: Config.Files.
		cfg, _ := dsl.Parse(files)
		ex := Example{Name: strings.TrimSuffix(name, ".hcl"), Files: map[string]string{name: string(src)}}
		for n := range cfg.Files {
			if b, ok := aux[filepath.ToSlash(n)]; ok {
				ex.Files[n] = string(b)
			}
		}
		out = append(out, ex)
	}
	return out
}

// NewFile returns the text a new file called name opens with: for a native-syntax policy
// file (.hcl), the starter policy rlctl init writes; for any other, nothing.
func NewFile(name string) string {
	if strings.HasSuffix(name, ".hcl") {
		return rlctl.Starter
	}
	return ""
}
