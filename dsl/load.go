package dsl

import (
	"bytes"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/zclconf/go-cty/cty"
)

// Load reads policy files and returns them as one validated Config. Each path is a file
// or a directory; a directory contributes its *.hcl and *.hcl.json files, sorted by name,
// not recursively. A file ending in .json is read as HCL's JSON syntax, any other file as
// native syntax. Plugin sources (algorithm "x" { source = "x.lua" }) are read relative to
// the policy file that names them.
//
// Every problem is an hcl.Diagnostic whose Subject is the range of the construct at
// fault; warnings do not stop loading. When diags has errors, the Config holds only Files,
// for rendering the diagnostics with WriteDiagnostics. Load never panics.
func Load(paths ...string) (*Config, hcl.Diagnostics) {
	var srcs []source
	var diags hcl.Diagnostics
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		b, err := os.ReadFile(name)
		if err != nil {
			diags = append(diags, errorf(hcl.Range{Filename: name, Start: hcl.InitialPos, End: hcl.InitialPos}, "Cannot read policy file", "%s.", err))
			return
		}
		srcs = append(srcs, source{name: name, src: b, json: strings.HasSuffix(name, ".json")})
	}
	for _, p := range paths {
		p = filepath.Clean(p)
		fi, err := os.Stat(p)
		if err != nil {
			diags = append(diags, errorf(hcl.Range{Filename: p, Start: hcl.InitialPos, End: hcl.InitialPos}, "Cannot read policy file", "%s.", err))
			continue
		}
		if !fi.IsDir() {
			add(p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			diags = append(diags, errorf(hcl.Range{Filename: p, Start: hcl.InitialPos, End: hcl.InitialPos}, "Cannot read policy directory", "%s.", err))
			continue
		}
		n := len(srcs)
		for _, e := range entries {
			if !e.IsDir() && isPolicyFile(e.Name()) {
				add(filepath.Join(p, e.Name()))
			}
		}
		if len(srcs) == n {
			diags = append(diags, errorf(hcl.Range{Filename: p, Start: hcl.InitialPos, End: hcl.InitialPos}, "No policy files", "The directory %s has no *.hcl or *.hcl.json files.", p))
		}
	}
	if len(paths) == 0 {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No policy files", Detail: "Name at least one policy file or directory."})
	}
	readAux := func(name string) ([]byte, error) { return os.ReadFile(name) }
	cfg, more := load(srcs, readAux)
	return cfg, append(diags, more...)
}

// Parse is Load for sources in memory, keyed by file name (the name diagnostics show).
// Names ending in .hcl are native syntax and names ending in .json JSON syntax; other
// entries, such as Lua files, are only there for algorithm blocks' source attributes,
// resolved relative to the naming file as Load does; a source files lacks is reported as
// Load reports a missing file. Parse reads nothing from disk.
func Parse(files map[string][]byte) (*Config, hcl.Diagnostics) {
	var srcs []source
	aux := map[string][]byte{}
	for _, name := range sortedKeys(files) {
		switch {
		case strings.HasSuffix(name, ".json"):
			srcs = append(srcs, source{name: name, src: files[name], json: true})
		case strings.HasSuffix(name, ".hcl"):
			srcs = append(srcs, source{name: name, src: files[name]})
		default:
			aux[filepath.Clean(name)] = files[name]
		}
	}
	readAux := func(name string) ([]byte, error) {
		if b, ok := aux[filepath.Clean(name)]; ok {
			return b, nil
		}
		// The error Load's os.ReadFile gives for a missing file, so the diagnostic reads
		// the same.
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOENT}
	}
	return load(srcs, readAux)
}

func isPolicyFile(name string) bool {
	return strings.HasSuffix(name, ".hcl") || strings.HasSuffix(name, ".hcl.json")
}

type source struct {
	name string
	src  []byte
	json bool
}

// loader holds the state of one load.
type loader struct {
	env     *evalEnv
	cfg     *Config
	diags   hcl.Diagnostics
	readAux func(name string) ([]byte, error)

	plugins  map[string]hcl.Range // plugin name → its block's DefRange
	pluginOK map[string]*algorithms.Algorithm
	policies map[string]*Policy
	// validators run plugins' Lua validate at load time (see validateWire).
	validators map[*algorithms.Algorithm]*validator
	// budget is the files' top-level budget over DefaultBudget.
	budget Budget
}

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "locals"},
		{Type: "policy", LabelNames: []string{"name"}},
		{Type: "algorithm", LabelNames: []string{"name"}},
		{Type: "scenario", LabelNames: []string{"name"}},
		{Type: "budget"},
	},
}

func load(srcs []source, readAux func(string) ([]byte, error)) (*Config, hcl.Diagnostics) {
	l := newLoader(readAux)
	byType := map[string][]*hcl.Block{}
	for _, s := range srcs {
		for _, b := range l.parse(s) {
			byType[b.Type] = append(byType[b.Type], b)
		}
	}
	l.decodeLocals(byType["locals"])
	l.decodeBudgets(byType["budget"])
	for _, b := range byType["algorithm"] {
		l.decodePlugin(b)
	}
	for _, b := range byType["policy"] {
		l.decodePolicy(b)
	}
	for _, b := range byType["scenario"] {
		l.decodeScenario(b)
	}
	if len(l.cfg.Plugins) > 0 && !l.diags.HasErrors() {
		if _, err := algorithms.Assemble(append(slices.Clone(algorithms.Builtin()), l.cfg.Plugins...)); err != nil {
			first := l.plugins[l.cfg.Plugins[0].Name]
			l.diags = append(l.diags, errorf(first, "Plugins do not assemble", "The engine script cannot be built with these algorithms: %s.", err))
		}
	}
	l.fillSubjects()
	sortDiagnostics(l.diags)
	if l.diags.HasErrors() {
		return &Config{Files: l.cfg.Files}, l.diags
	}
	return l.cfg, l.diags
}

func newLoader(readAux func(string) ([]byte, error)) *loader {
	return &loader{
		cfg:      &Config{Files: map[string]*hcl.File{}},
		readAux:  readAux,
		plugins:  map[string]hcl.Range{},
		pluginOK: map[string]*algorithms.Algorithm{},
		policies: map[string]*Policy{},
		env: &evalEnv{
			locals: map[string]cty.Value{},
			files:  map[string][]byte{},
			json:   map[string]bool{},
		},
	}
}

// parse parses one source file and returns its top-level blocks.
func (l *loader) parse(s source) []*hcl.Block {
	var f *hcl.File
	var d hcl.Diagnostics
	if s.json {
		f, d = hcljson.Parse(s.src, s.name)
	} else {
		f, d = hclsyntax.ParseConfig(s.src, s.name, hcl.InitialPos)
	}
	l.diags = append(l.diags, d...)
	if f == nil {
		f = &hcl.File{Body: hcl.EmptyBody(), Bytes: s.src}
	}
	l.cfg.Files[s.name] = f
	l.env.files[s.name] = s.src
	l.env.json[s.name] = s.json
	if d.HasErrors() {
		return nil // a file that does not parse contributes nothing further
	}
	if huge := hugeLiterals(f, s); len(huge) > 0 {
		l.diags = append(l.diags, huge...)
		return nil
	}
	content, d := f.Body.Content(rootSchema)
	l.diags = append(l.diags, d...)
	return content.Blocks
}

// hugeLiterals reports number literals beyond float64's range. They are refused before
// anything is evaluated: HCL formats numbers exactly when it converts them to strings,
// which for 1e100000000 takes minutes.
func hugeLiterals(f *hcl.File, s source) hcl.Diagnostics {
	var diags hcl.Diagnostics
	report := func(r hcl.Range) {
		diags = append(diags, errorf(r, "Number out of range", "This number is too large or too small for a 64-bit float. Policies count requests and time in whole numbers up to 2^53."))
	}
	if body, ok := f.Body.(*hclsyntax.Body); ok {
		hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
			if lit, ok := n.(*hclsyntax.LiteralValueExpr); ok && hugeNumber(lit.Val) {
				report(lit.SrcRange)
			}
			return nil
		})
		return diags
	}
	if s.json {
		for _, r := range hugeJSONNumbers(s.src) {
			report(hcl.Range{Filename: s.name, Start: posAt(s.src, r[0]), End: posAt(s.src, r[1])})
		}
	}
	return diags
}

// hugeJSONNumbers returns the byte ranges of the numbers outside strings in JSON src whose
// decimal exponent puts them beyond float64's range.
func hugeJSONNumbers(src []byte) [][2]int {
	var out [][2]int
	inString := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == '-' || (c >= '0' && c <= '9')):
			j := i + 1
			for j < len(src) && strings.IndexByte("0123456789.eE+-", src[j]) >= 0 {
				j++
			}
			if f, _, err := big.ParseFloat(string(src[i:j]), 10, 64, big.ToNearestEven); err == nil && hugeNumber(cty.NumberVal(f)) {
				out = append(out, [2]int{i, j})
			}
			i = j - 1
		}
	}
	return out
}

// posAt returns the position of byte offset off in src.
func posAt(src []byte, off int) hcl.Pos {
	line := 1 + bytes.Count(src[:off], []byte("\n"))
	col := 1 + off - (bytes.LastIndexByte(src[:off], '\n') + 1)
	return hcl.Pos{Line: line, Column: col, Byte: off}
}

// fillSubjects gives any diagnostic that lacks a Subject (none should) the start of its
// file, or of the first file, so that every diagnostic can be located.
func (l *loader) fillSubjects() {
	for _, d := range l.diags {
		if d.Subject != nil {
			continue
		}
		for _, name := range sortedKeys(l.cfg.Files) {
			d.Subject = &hcl.Range{Filename: name, Start: hcl.InitialPos, End: hcl.InitialPos}
			break
		}
	}
}

// add appends diagnostics.
func (l *loader) add(d ...*hcl.Diagnostic) { l.diags = append(l.diags, d...) }

// ordered returns attributes in source order.
func ordered(attrs hcl.Attributes) []*hcl.Attribute {
	out := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *hcl.Attribute) int {
		if a.Range.Filename != b.Range.Filename {
			return strings.Compare(a.Range.Filename, b.Range.Filename)
		}
		return a.Range.Start.Byte - b.Range.Start.Byte
	})
	return out
}

// constString compiles an attribute that must be a constant string.
func (l *loader) constString(a *hcl.Attribute) (string, bool) {
	e, d := l.env.compile(a.Expr, constScope, cty.String)
	l.add(d...)
	if e == nil {
		return "", false
	}
	if e.kind != kindConst || e.val.IsNull() {
		l.add(errorf(a.Expr.Range(), "Constant required", "%s must be a constant string.", a.Name))
		return "", false
	}
	return e.val.AsString(), true
}
