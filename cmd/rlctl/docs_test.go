package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/verify"
	"github.com/rogpeppe/go-internal/txtar"
)

// root is the repository's root, relative to this package.
const root = "../.."

// TestDocsPlugins holds docs/plugins.md to the repository. Every fenced block is checked,
// by the marker on the line before it:
//
//	<!-- file: PATH -->          ```hcl or ```lua: PATH's text, or excerpts of it in order
//	                             with "..." lines between them
//	<!-- example: FILE FUNC -->  ```go: the body of function FUNC in FILE, verbatim but for
//	                             its paths: FILE's "../policies/" is the guide's "policies/"
//	<!-- variant: TXTAR -->      ```diff: TXTAR's file variant/PATH is the repository's PATH
//	                             with the diff applied;
//	                             a session: run on a copy of the repository's policies/ with
//	                             TXTAR's variant/ files over it, as TXTAR's script does
//	(none)                       a session: run at the repository's root
//
// A session is a block of "$ rlctl ..." lines, each followed by an excerpt of what it
// prints (stdout and stderr): its lines appear in the output in that order, "..." stands
// for lines left out and a line ending in "..." for the rest of a line. The commands run
// in process, through the same run function as the binary.
//
// The regions between <!-- commands -->, <!-- forbidden -->, <!-- statements --> and
// <!-- properties --> and their <!-- end of … --> name exactly what dsl allows, forbids,
// what verify states for each guarantee shape, and verify's properties.
func TestDocsPlugins(t *testing.T) {
	if raceEnabled {
		t.Skip("runs verify at its default budget; checked without the race detector (make proofs)")
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "plugins.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(t, "docs/plugins.md", string(doc))
	if len(blocks) < 10 {
		t.Fatalf("only %d fenced blocks in docs/plugins.md", len(blocks))
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, abs, "docs/plugins.md", blocks)
	if !strings.Contains(string(doc), algorithms.CheckContract) {
		t.Errorf("docs/plugins.md does not quote algorithms.CheckContract: %q", algorithms.CheckContract)
	}
	t.Run("commands", func(t *testing.T) { checkCommands(t, region(t, string(doc), "commands")) })
	t.Run("forbidden", func(t *testing.T) { checkForbidden(t, region(t, string(doc), "forbidden")) })
	t.Run("statements", func(t *testing.T) { checkStatements(t, abs, region(t, string(doc), "statements")) })
	t.Run("properties", func(t *testing.T) { checkProperties(t, abs, region(t, string(doc), "properties")) })
}

// checkBlocks checks the fenced blocks of the page name (relative to the repository's
// root, abs), as TestDocsPlugins describes.
func checkBlocks(t *testing.T, abs, name string, blocks []docBlock) {
	for _, b := range blocks {
		t.Run(fmt.Sprintf("line_%d", b.line), func(t *testing.T) {
			kind, arg, _ := strings.Cut(b.marker, ": ")
			switch {
			case kind == "file" && (b.lang == "hcl" || b.lang == "lua"):
				checkExcerpt(t, filepath.Join(abs, arg), b.text)
			case kind == "example" && b.lang == "go":
				checkExample(t, abs, arg, b.text)
			case kind == "variant" && b.lang == "diff":
				checkDiff(t, abs, arg, b.text)
			case kind == "variant" && b.session():
				t.Chdir(variantDir(t, abs, arg))
				checkSession(t, b.text)
			case kind == "in" && arg == "an empty directory" && b.session():
				t.Chdir(t.TempDir())
				checkSession(t, b.text)
			case kind == "" && b.session():
				t.Chdir(abs)
				checkSession(t, b.text)
			default:
				t.Errorf("%s:%d: a ```%s block with marker %q: nothing checks it", name, b.line, b.lang, b.marker)
			}
		})
	}
}

// TestDocsRuntime holds docs/runtime.md to the repository, as TestDocsPlugins does its
// page: every fenced block is an excerpt of a file or a session whose output it quotes.
func TestDocsRuntime(t *testing.T) {
	if raceEnabled {
		t.Skip("runs verify at its default budget; checked without the race detector (make proofs)")
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "runtime.md"))
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(t, "docs/runtime.md", string(doc))
	if len(blocks) < 3 {
		t.Fatalf("only %d fenced blocks in docs/runtime.md", len(blocks))
	}
	checkBlocks(t, abs, "docs/runtime.md", blocks)
}

// TestDocsQuotas holds docs/calendar.md, docs/delays.md and docs/settle.md to the repository, as
// TestDocsRuntime does its page.
func TestDocsQuotas(t *testing.T) {
	if raceEnabled {
		t.Skip("runs verify at its default budget; checked without the race detector (make proofs)")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"calendar.md", "delays.md", "settle.md"} {
		t.Run(page, func(t *testing.T) {
			doc, err := os.ReadFile(filepath.Join(root, "docs", page))
			if err != nil {
				t.Fatal(err)
			}
			blocks := fencedBlocks(t, "docs/"+page, string(doc))
			if len(blocks) < 3 {
				t.Fatalf("only %d fenced blocks in docs/%s", len(blocks), page)
			}
			checkBlocks(t, abs, "docs/"+page, blocks)
		})
	}
}

// TestDocsPluginVerifies: the guide's plugin policy passes verify at its default budget
// with no failure and no warning.
func TestDocsPluginVerifies(t *testing.T) {
	if raceEnabled {
		t.Skip("runs verify at its default budget; checked without the race detector (make proofs)")
	}
	cfg, diags := dsl.Load(filepath.Join(root, "policies", "simple_gcra.hcl"))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	f, err := verify.Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Results {
		if r.Status == verify.Fail || r.Status == verify.Warn {
			t.Errorf("%s %s %s: %s %s", r.Policy, r.Rule, r.Property, r.Status, r.Detail)
		}
	}
}

// docBlock is a fenced block of the guide.
type docBlock struct {
	line   int    // of the opening fence, 1-based
	lang   string // after the fence
	marker string // the <!-- ... --> comment on the line before, "" if none
	text   string // the lines inside, each ending in "\n"
}

func (b docBlock) session() bool { return b.lang == "" && strings.HasPrefix(b.text, "$ rlctl ") }

var markerRE = regexp.MustCompile(`^<!-- ((?:file|example|variant|quote|in): .+) -->$`)

// fencedBlocks returns the fenced blocks of doc, the text of the file named name.
func fencedBlocks(t *testing.T, name, doc string) []docBlock {
	var out []docBlock
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok {
			continue
		}
		b := docBlock{line: i + 1, lang: lang}
		if i > 0 {
			if m := markerRE.FindStringSubmatch(lines[i-1]); m != nil {
				b.marker = m[1]
			}
		}
		var body strings.Builder
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body.WriteString(lines[i] + "\n")
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: the block never ends", name, b.line)
		}
		b.text = body.String()
		out = append(out, b)
	}
	return out
}

// checkExcerpt checks that text is the file at path, or excerpts of it in order, "..."
// lines between them.
func checkExcerpt(t *testing.T, path, text string) {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	content, from := "\n"+string(src), 0
	for _, part := range splitEllipsis(text) {
		i := strings.Index(content[from:], "\n"+part)
		if i < 0 {
			t.Errorf("this excerpt is not in %s (after what came before it):\n%s", path, part)
			return
		}
		from += i + len(part)
	}
}

// splitEllipsis splits text at its "..." lines into the runs of lines between them.
func splitEllipsis(text string) []string {
	var parts []string
	var cur strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.TrimSpace(l) == "..." {
			if cur.Len() > 0 {
				parts = append(parts, cur.String())
			}
			cur.Reset()
			continue
		}
		cur.WriteString(l)
	}
	if cur.Len() > 0 {
		parts = append(parts, cur.String())
	}
	return parts
}

// checkExample checks that text is FILE (arg "FILE") or the body of function FUNC in FILE
// (arg "FILE FUNC") less one tab of indentation, its "../policies/" read as "policies/".
func checkExample(t *testing.T, abs, arg, text string) {
	file, fn, _ := strings.Cut(arg, " ")
	path := filepath.Join(abs, file)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fn == "" {
		if got := strings.ReplaceAll(string(src), `"../policies/`, `"policies/`); got != text {
			t.Errorf("the go block is not %s:\n--- docs\n%s--- %s\n%s", file, text, file, got)
		}
		return
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var body string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
			from, to := fset.Position(fd.Body.Lbrace).Offset+1, fset.Position(fd.Body.Rbrace).Offset
			body = strings.TrimPrefix(string(src[from:to]), "\n")
		}
	}
	if body == "" {
		t.Fatalf("%s has no function %s", file, fn)
	}
	var want strings.Builder
	for _, l := range strings.SplitAfter(body, "\n") {
		want.WriteString(strings.TrimPrefix(l, "\t"))
	}
	if got := strings.ReplaceAll(want.String(), `"../policies/`, `"policies/`); got != text {
		t.Errorf("the go block is not %s's body in %s:\n--- docs\n%s--- %s\n%s", fn, file, text, file, got)
	}
}

// variantFiles reads TXTAR's variant/ files: the repository's paths they replace, and
// their text.
func variantFiles(t *testing.T, abs, archive string) map[string][]byte {
	ar, err := txtar.ParseFile(filepath.Join(abs, archive))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range ar.Files {
		if name, ok := strings.CutPrefix(f.Name, "variant/"); ok {
			files[name] = f.Data
		}
	}
	if len(files) == 0 {
		t.Fatalf("%s has no variant/ files", archive)
	}
	return files
}

// variantDir is a directory holding a copy of the repository's policies/ with archive's
// variant/ files over it: what archive's script runs on.
func variantDir(t *testing.T, abs, archive string) string {
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "policies"), os.DirFS(filepath.Join(abs, "policies"))); err != nil {
		t.Fatal(err)
	}
	for name, data := range variantFiles(t, abs, archive) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkDiff checks that applying the unified diff text (one hunk, no line numbers) to
// the repository's file gives archive's variant of it.
func checkDiff(t *testing.T, abs, archive, text string) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "--- ") || lines[1] != "+++ "+lines[0][4:] {
		t.Fatalf("the diff does not open with --- PATH and +++ PATH:\n%s", text)
	}
	path := lines[0][4:]
	var old, new strings.Builder
	for _, l := range lines[2:] {
		switch {
		case strings.HasPrefix(l, " "):
			old.WriteString(l[1:] + "\n")
			new.WriteString(l[1:] + "\n")
		case strings.HasPrefix(l, "-"):
			old.WriteString(l[1:] + "\n")
		case strings.HasPrefix(l, "+"):
			new.WriteString(l[1:] + "\n")
		default:
			t.Fatalf("diff line %q", l)
		}
	}
	src, err := os.ReadFile(filepath.Join(abs, path))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), old.String()); n != 1 {
		t.Fatalf("the diff's old lines are %d times in %s, want once:\n%s", n, path, old.String())
	}
	variant, ok := variantFiles(t, abs, archive)[path]
	if !ok {
		t.Fatalf("%s has no variant/%s", archive, path)
	}
	if got := strings.Replace(string(src), old.String(), new.String(), 1); got != string(variant) {
		t.Errorf("%s with the diff applied is not %s's variant/%s", path, archive, path)
	}
}

// checkSession runs each "$ rlctl ..." line of text and checks the lines after it against
// what it prints.
func checkSession(t *testing.T, text string) {
	var cmd []string
	var want []string
	flush := func() {
		if cmd == nil {
			return
		}
		var out bytes.Buffer
		code := run(cmd, &env{stdout: &out, stderr: &out})
		got := strings.Split(out.String(), "\n")
		at := 0
		for _, w := range want {
			if strings.TrimSpace(w) == "..." || w == "" {
				continue
			}
			prefix, partial := strings.CutSuffix(w, "...")
			found := false
			for ; at < len(got) && !found; at++ {
				found = got[at] == w || partial && strings.HasPrefix(got[at], prefix)
			}
			if !found {
				t.Errorf("$ rlctl %s (exit %d): the line\n%s\nis not in the output (in order):\n%s", strings.Join(cmd, " "), code, w, out.String())
				return
			}
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if args, ok := strings.CutPrefix(l, "$ rlctl "); ok {
			flush()
			cmd, want = strings.Fields(args), nil
			continue
		}
		want = append(want, l)
	}
	flush()
}

// region returns the text between <!-- name --> and <!-- end of name -->.
func region(t *testing.T, doc, name string) string {
	_, rest, ok := strings.Cut(doc, "<!-- "+name+" -->\n")
	text, _, ok2 := strings.Cut(rest, "<!-- end of "+name+" -->")
	if !ok || !ok2 {
		t.Fatalf("docs/plugins.md lacks the %s region", name)
	}
	return text
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	upper    = regexp.MustCompile(`^[A-Z]+$`)
)

// commandNames returns the upper-case code spans of text, such as `PEXPIRE`.
func commandNames(text string) []string {
	var names []string
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		if upper.MatchString(m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

// pluginWithCommands is a policy file whose plugin lists commands.
func pluginWithCommands(cmds []string) map[string][]byte {
	return map[string][]byte{
		"p.hcl": fmt.Appendf(nil, `algorithm "x" {
  source   = "x.lua"
  params   = { limit = "count" }
  commands = [%s]
  guarantee "none" {}
}
`, `"`+strings.Join(cmds, `", "`)+`"`),
		"x.lua": []byte("params = {'pos'}\nfunction check(key, now, cost, p) return 1, 0, 0, 0, p[1] end\nfunction commit(key, w) end\n"),
	}
}

// checkCommands: the commands region lists exactly the commands dsl allows a plugin,
// read from the diagnostic for a command it does not.
func checkCommands(t *testing.T, text string) {
	_, diags := dsl.Parse(pluginWithCommands([]string{"NOPE"}))
	var allowed []string
	for _, d := range diags {
		if d.Summary == "Command not available" {
			_, list, _ := strings.Cut(d.Detail, "both run: ")
			allowed = strings.Split(strings.TrimSuffix(list, "."), ", ")
		}
	}
	if len(allowed) < 10 {
		t.Fatalf("no list of allowed commands in the diagnostics: %v", diags)
	}
	got := commandNames(text)
	slices.Sort(got)
	if !slices.Equal(got, allowed) {
		t.Errorf("the commands region lists\n%v\ndsl allows\n%v", got, allowed)
	}
}

// checkForbidden: each command the forbidden region names is refused as not allowed.
func checkForbidden(t *testing.T, text string) {
	names := commandNames(text)
	if len(names) < 5 {
		t.Fatalf("the forbidden region names %v", names)
	}
	_, diags := dsl.Parse(pluginWithCommands(names))
	for _, c := range names {
		if !slices.ContainsFunc(diags, func(d *hcl.Diagnostic) bool {
			return d.Summary == "Command not allowed" && strings.HasPrefix(d.Detail, "A plugin may not call "+c+":")
		}) {
			t.Errorf("%s is not refused as a command not allowed", c)
		}
	}
}

// checkStatements: each statement of the statements region, its upper-case words
// standing for the rule's figures, is one verify states (a limit statement, or the detail
// of a skipped one) for the repository's policies or a variant of the guide's: and every
// limit statement verify states for them is one of the region's.
func checkStatements(t *testing.T, abs, text string) {
	var templates []*regexp.Regexp
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		if strings.Count(m[1], " ") < 6 {
			continue // a shape or a figure's name
		}
		re := regexp.QuoteMeta(m[1])
		re = regexp.MustCompile(`\b[A-Z]{2,}\b`).ReplaceAllString(re, `.+`)
		templates = append(templates, regexp.MustCompile("^"+re+"$"))
	}
	if len(templates) < 5 {
		t.Fatalf("only %d statements in the region", len(templates))
	}
	none, err := os.ReadFile(filepath.Join(abs, "policies", "simple_gcra.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	none = regexp.MustCompile(`(?s)guarantee "rate" \{.*?\n  \}`).ReplaceAll(none, []byte(`guarantee "none" {}`))
	lua, err := os.ReadFile(filepath.Join(abs, "policies", "plugins", "simple_gcra.lua"))
	if err != nil {
		t.Fatal(err)
	}
	noneCfg, diags := dsl.Parse(map[string][]byte{"p.hcl": none, "plugins/simple_gcra.lua": lua})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	repoCfg, diags := dsl.Load(filepath.Join(abs, "policies"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var said, limits []string
	for _, cfg := range []*dsl.Config{repoCfg, noneCfg} {
		f, err := verify.Check(cfg, verify.WithBudget(30))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Results {
			if r.Property == verify.PropLimit {
				said = append(said, r.Statement, r.Detail)
				if r.Statement != "" {
					limits = append(limits, r.Statement)
				}
			}
		}
	}
	matches := func(s string) bool {
		return slices.ContainsFunc(templates, func(re *regexp.Regexp) bool { return re.MatchString(s) })
	}
	for _, re := range templates {
		if !slices.ContainsFunc(said, re.MatchString) {
			t.Errorf("verify states nothing like %s", re)
		}
	}
	for _, s := range limits {
		if !matches(s) {
			t.Errorf("verify states %q, which the statements region does not show", s)
		}
	}
}

// checkProperties: the properties region names exactly verify's properties (the Prop
// constants of verify/props.go), each line's first code span.
func checkProperties(t *testing.T, abs, text string) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(abs, "verify", "props.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var props []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if strings.HasPrefix(n.Name, "Prop") && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						v, _ := strconv.Unquote(lit.Value)
						props = append(props, v)
					}
				}
			}
		}
	}
	var got []string
	for _, l := range strings.Split(text, "\n") {
		if m := codeSpan.FindStringSubmatch(l); m != nil && strings.HasPrefix(l, "- ") {
			if !slices.Contains(got, m[1]) {
				got = append(got, m[1])
			}
		}
	}
	slices.Sort(props)
	slices.Sort(got)
	if len(props) < 10 || !slices.Equal(got, props) {
		t.Errorf("the properties region names\n%q\nverify's properties are\n%q", got, props)
	}
}

// TestReadmeWriteAnAlgorithm: the README's algorithm block is the guide's plugin's, each
// line (less its comment) a line of policies/simple_gcra.hcl in order, and the README's
// count of the example policies is what validate prints.
func TestReadmeWriteAnAlgorithm(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Write an algorithm\n")
	_, block, ok2 := strings.Cut(section, "```hcl\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README lacks the Write an algorithm section's hcl block")
	}
	src, err := os.ReadFile(filepath.Join(root, "policies", "simple_gcra.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	lines, at := strings.Split(string(src), "\n"), 0
	for _, l := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		if i := strings.Index(l, " #"); i >= 0 {
			l = strings.TrimRight(l[:i], " ")
		}
		for at < len(lines) && lines[at] != l {
			at++
		}
		if at == len(lines) {
			t.Errorf("README line %q is not in policies/simple_gcra.hcl (in order)", l)
			return
		}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(abs)
	_, after, ok := strings.Cut(string(readme), "\n$ rlctl validate policies/\n")
	want, _, _ := strings.Cut(after, "\n")
	var out bytes.Buffer
	run([]string{"validate", "policies/"}, &env{stdout: &out, stderr: &out})
	if !ok || strings.TrimSpace(out.String()) != want {
		t.Errorf("README says %q after $ rlctl validate policies/; it prints %q", want, out.String())
	}
}

// TestReadmeInstall: README.md's Install section follows its opening commands, installs the
// module's cmd/rlctl with go install …@latest, and its from-source command builds an rlctl
// whose version names the commit it was built from.
func TestReadmeInstall(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "```sh\n")
	_, after, ok2 := strings.Cut(after, "\n```\n")
	section, ok3 := strings.CutPrefix(after, "\n## Install\n")
	section, _, _ = strings.Cut(section, "\n## ")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README's opening sh block is not followed by an Install section")
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	path, _, _ := strings.Cut(strings.TrimPrefix(string(mod), "module "), "\n")
	if want := "go install " + path + "/cmd/rlctl@latest"; !strings.Contains(section, "\n"+want+" ") {
		t.Errorf("README's Install section lacks %q", want)
	}
	const build = "go build -o rlctl ./cmd/rlctl"
	if !strings.Contains(section, "\n"+build+" ") {
		t.Fatalf("README's Install section lacks %q", build)
	}
	if testing.Short() {
		t.Skip("builds rlctl")
	}
	// What the section promises needs go, git and a checkout: a missing one is a failure,
	// not a skip, so that the promise is never left unchecked quietly.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go tool on PATH (%v): the README's from-source build cannot be checked", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("no git on PATH (%v): the version's revision cannot be checked", err)
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").CombinedOutput(); err != nil {
		t.Fatalf("%s is not a git checkout (%v: %s): the version's revision cannot be checked; run the test from a clone", root, err, out)
	}
	// The README's command, writing the binary elsewhere, with VCS stamping on whatever
	// the machine's go env GOFLAGS say.
	bin := filepath.Join(t.TempDir(), "rlctl")
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/rlctl")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("rlctl version: %v", err)
	}
	m := regexp.MustCompile(`^rlctl \S+, revision ([0-9a-f]{40}) of \S+( with local modifications)?, go\S+\n$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("rlctl version printed %q; want the commit it was built from", out)
	}
	if err := exec.Command("git", "-C", root, "cat-file", "-e", string(m[1])+"^{commit}").Run(); err != nil {
		t.Errorf("rlctl version names revision %s, which is not a commit of the repository", m[1])
	}
}

// TestReadmeGoSnippets holds every ```go block of README.md to a compiled, tested example:
// the line before it is a marker <!-- example: FILE --> (the block is FILE, whole) or
// <!-- example: FILE FUNC --> (the body of FUNC), checked as docs/plugins.md's are. The
// Examples run with their packages' tests; engine's TestExampleEmbedOnRedis runs the
// embed example on a real Redis.
func TestReadmeGoSnippets(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range fencedBlocks(t, "README.md", string(readme)) {
		if b.lang != "go" {
			continue
		}
		n++
		arg, ok := strings.CutPrefix(b.marker, "example: ")
		if !ok {
			t.Errorf("README.md:%d: a ```go block without an <!-- example: FILE [FUNC] --> marker before it", b.line)
			continue
		}
		checkExample(t, abs, arg, b.text)
	}
	if n < 2 {
		t.Errorf("README.md has %d go blocks; want the Embed in Go and HTTP middleware ones", n)
	}
}
