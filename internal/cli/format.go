package cli

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// FormatRefuses is rlctl fmt's refusal of the file name: an error for JSON syntax (a name
// ending in .json), which fmt leaves alone; nil for any other name.
func FormatRefuses(name string) error {
	if strings.HasSuffix(name, ".json") {
		return fmt.Errorf("%s: fmt formats native syntax (.hcl), not JSON", name)
	}
	return nil
}

// NotRewritten is rlctl fmt's error for the file name that does not parse.
func NotRewritten(name string) error {
	return fmt.Errorf("%s does not parse; not rewritten", name)
}

// SourceFiles is the files to render the diagnostics of src, the native-syntax file
// name, with: its parse, or, when it does not parse at all, its bytes alone, so a syntax
// error still shows its source line. dsl.Format's diagnostics need it: Format returns no
// file.
func SourceFiles(name string, src []byte) map[string]*hcl.File {
	f, _ := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if f == nil {
		f = &hcl.File{Body: hcl.EmptyBody(), Bytes: src}
	}
	return map[string]*hcl.File{name: f}
}
