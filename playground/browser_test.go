//go:build !js

package playground

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/rlctl/rlctl"
)

// TestPlaygroundInBrowser drives the page in a headless Chromium, through chromedriver,
// as a user would: it loads the first example and sees it highlighted (the layer under
// the editor holding the editor's text exactly, in tokens, on the editor's lines, as it
// does after each edit, for HCL and Lua); reads the quick reference, each topic the text
// Reference returns; types a misspelt algorithm and sees the diagnostic at its line and
// column, clicks it and has the cursor there; fixes it; simulates and sees the plot;
// breaks the example plugin's Lua, verifies at a small
// budget and sees the failure with its counterexample, after stopping a long verify
// first; and opens the share link in a fresh page and gets the same files. It logs the
// module's size and the time from page load to the first validate result shown, and
// saves screenshots to $RLCTL_SCREENSHOTS when that is set. Without chromium and
// chromedriver it skips, or fails when RLCTL_REQUIRE_BROWSER=1.
func TestPlaygroundInBrowser(t *testing.T) {
	if raceEnabled {
		t.Skip("drives a browser for a minute; checked without the race detector (make proofs)")
	}
	chromium, chromedriver := browserBinaries(t)
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	logWasmSize(t)
	d := startBrowser(t, chromium, chromedriver)

	// The first example, validated.
	d.navigate(srv.URL + "/")
	var timing struct{ Compiled, Ready, Examples, FirstResult float64 }
	d.waitFor("the first validate result", &timing, `return window.rlctlTiming && rlctlTiming.firstResult !== undefined && rlctlTiming`)
	t.Logf("time to first result: %.0f ms from navigation start (module compiled at %.0f ms, worker ready at %.0f ms, examples at %.0f ms)",
		timing.FirstResult, timing.Compiled, timing.Ready, timing.Examples)
	var examples []string
	d.exec(&examples, `return [...document.querySelectorAll("#examples button")].map((b) => b.textContent)`)
	if len(examples) != len(Examples()) || examples[0] != Examples()[0].Name {
		t.Errorf("example buttons %q, want one per example, %s first", examples, Examples()[0].Name)
	}
	first := Examples()[0]
	if got := d.text(".tab.active"); got != first.Name+".hcl" {
		t.Errorf("the active tab is %q, want %s.hcl", got, first.Name)
	}
	if want := Validate(first.Files).Summary; d.text("#status") != want {
		t.Errorf("status %q, want validate's summary %q", d.text("#status"), want)
	}
	d.screenshot("1-loaded")

	// The editor's text, highlighted: block types, strings; the tokenizers on texts hard
	// to split, and their speed on a long file.
	tokens := checkHighlight(t, d, "the first example")
	if !slices.Contains(tokens["tok-block"], "policy") || len(tokens["tok-string"]) == 0 || len(tokens["tok-attr"]) == 0 {
		t.Errorf("the first example's tokens are %q; want the block type policy, strings, attribute names", tokens)
	}
	checkTokenizers(t, d, first.Files[first.Name+".hcl"])

	// The quick reference, beside the editor.
	checkReference(t, d)

	// A misspelt algorithm: the diagnostic at its line and column, in the list and the
	// gutter.
	src := first.Files[first.Name+".hcl"]
	m := regexp.MustCompile(`algorithm = "(\w+)"`).FindStringSubmatch(src)
	if m == nil {
		t.Fatalf("%s.hcl has no algorithm", first.Name)
	}
	// The algorithm's name with its last two letters swapped: "fixed_window" is
	// "fixed_windwo".
	name := m[1]
	typo := name[:len(name)-2] + name[len(name)-1:] + name[len(name)-2:len(name)-1]
	good, bad := `algorithm = "`+name+`"`, `algorithm = "`+typo+`"`
	at := strings.Index(src, good)
	line, col := strings.Count(src[:at], "\n")+1, len(`algorithm = `)+at-strings.LastIndex(src[:at], "\n")
	selectText(d, src, at+len(`algorithm = "`), len(name))
	d.sendKeys("#text", typo)
	var diag struct {
		Line, Column int
		Gutter       []string
	}
	d.waitFor("the unknown-algorithm diagnostic", &diag, `
		const li = [...document.querySelectorAll("#diagnostics li.error")].find((li) => li.textContent.includes("Unknown algorithm"));
		return li && {line: +li.dataset.line, column: +li.dataset.column,
			gutter: [...document.querySelectorAll("#gutter .ln.error")].map((e) => e.textContent)}`)
	// The gutter marks the line; other lines may be marked too, by the errors that
	// follow from the rule that no longer loads (a scenario's expect naming it).
	if diag.Line != line || diag.Column != col || !slices.Contains(diag.Gutter, strconv.Itoa(line)) {
		t.Errorf("the diagnostic is at %d:%d, the gutter marks lines %q; want %d:%d, line %d marked", diag.Line, diag.Column, diag.Gutter, line, col, line)
	}
	if s := d.text("#diagnostics li.error"); !strings.Contains(s, `Did you mean "`+name+`"?`) {
		t.Errorf("the diagnostic says %q; want the did-you-mean", s)
	}
	if tokens := checkHighlight(t, d, "the misspelt algorithm typed"); !slices.Contains(tokens["tok-string"], `"`+typo+`"`) {
		t.Errorf("the strings highlighted are %q; want the misspelt %q among them", tokens["tok-string"], typo)
	}
	d.exec(nil, `document.getElementById("text").blur()`)
	d.click("#diagnostics li.error")
	var cursor struct {
		Focused    bool
		Start, End int
	}
	d.exec(&cursor, `const ta = document.getElementById("text"); return {focused: document.activeElement === ta, start: ta.selectionStart, end: ta.selectionEnd}`)
	if want := strings.Replace(src, good, bad, 1); !cursor.Focused || cursor.Start != offsetOf(want, line, col) || cursor.End != cursor.Start {
		t.Errorf("after a click on the diagnostic the editor has %+v; want the cursor at %d:%d, offset %d", cursor, line, col, offsetOf(want, line, col))
	}
	d.screenshot("2-diagnostic")

	// Fixed again: no error left.
	selectText(d, src, at+len(`algorithm = "`), len(typo))
	d.sendKeys("#text", name)
	d.waitFor("the fix validated", nil, `return !document.querySelector("#diagnostics li.error") && !document.querySelector("#gutter .ln.error") && document.getElementById("status").textContent`)
	if got, want := d.text("#status"), Validate(first.Files).Summary; got != want {
		t.Errorf("status after the fix %q, want %q", got, want)
	}

	// Format: the file back in canonical form from a line indented wrongly.
	selectText(d, src, strings.LastIndex(src[:at], "\n")+1, 0)
	d.sendKeys("#text", "   ")
	d.click("#format")
	d.waitFor("the file formatted", nil, `return document.getElementById("text").value === arguments[0] && state.files[arguments[1]] === arguments[0]`, src, first.Name+".hcl")

	// Simulate: each scenario's report with its plot.
	d.click("#simulate")
	var report struct {
		Scenario string
		SVG      bool
		Text     string
	}
	d.waitFor("the simulate report", &report, `
		const r = document.querySelector("#output .report");
		return r && {scenario: r.dataset.scenario, svg: !!r.querySelector(".plot svg rect"), text: r.querySelector("pre").textContent}`)
	want := Simulate(first.Files, SimulateOptions{})
	if len(want.Reports) == 0 || report.Scenario != want.Reports[0].Scenario || !report.SVG || report.Text != want.Reports[0].Text {
		t.Errorf("the page shows the report of %q (plot %v):\n%s\nwant %q's:\n%s", report.Scenario, report.SVG, report.Text, want.Reports[0].Scenario, want.Reports[0].Text)
	}
	d.screenshot("3-simulate")

	// Unsaved edits: choosing another example asks first, and a No keeps them.
	d.exec(nil, `window.confirms = []; window.confirmAnswer = false;
		window.confirm = (m) => { confirms.push(m); return confirmAnswer; }`)
	selectText(d, src, 0, 0)
	d.sendKeys("#text", "# edited\n")
	d.waitFor("the edited files' link", nil, `return /^#f=/.test(location.hash)`)
	if tokens := checkHighlight(t, d, "a comment typed at the top"); len(tokens["tok-comment"]) == 0 || tokens["tok-comment"][0] != "# edited" {
		t.Errorf("the comments highlighted are %q; want # edited first", tokens["tok-comment"])
	}
	var unload bool
	d.exec(&unload, `const e = new Event("beforeunload", {cancelable: true}); window.dispatchEvent(e); return e.defaultPrevented`)
	if !unload {
		t.Errorf("with unsaved edits, beforeunload is not cancelled: leaving the page does not warn")
	}
	d.click(`#examples button[data-example="login"]`)
	var kept struct {
		Confirms []string
		Text     string
	}
	d.exec(&kept, `return {confirms, text: state.files[arguments[0]]}`, first.Name+".hcl")
	if len(kept.Confirms) != 1 || kept.Text != "# edited\n"+src {
		t.Fatalf("choosing an example with unsaved edits asked %q and left the file:\n%.200s\nwant one confirmation and the edit kept", kept.Confirms, kept.Text)
	}
	// A Yes: the example, in a history entry of its own.
	login := exampleFiles(t, "login")
	d.exec(nil, `confirmAnswer = true`)
	d.click(`#examples button[data-example="login"]`)
	d.waitFor("the login example at #example=login", nil, `return location.hash === "#example=login" && filesJSON() === JSON.stringify(arguments[0]) && confirms.length === 2`, login)
	// Back: the edited files, from their link; Forward: the example again. Neither asks,
	// as neither replaces unsaved edits.
	editedFirst := map[string]string{first.Name + ".hcl": "# edited\n" + src}
	d.exec(nil, `history.back()`)
	d.waitFor("Back to the edited files", nil, `return /^#f=/.test(location.hash) && filesJSON() === JSON.stringify(arguments[0])`, editedFirst)
	d.exec(nil, `history.forward()`)
	d.waitFor("Forward to the login example", nil, `return location.hash === "#example=login" && filesJSON() === JSON.stringify(arguments[0])`, login)
	var asked int
	d.exec(&asked, `return confirms.length`)
	if asked != 2 {
		t.Errorf("Back and Forward over unedited files asked %d times; want none", asked-2)
	}

	// The request panel: three logins for one account at 2 units each pass, pass, and
	// are denied by the account's rule (a burst of 5).
	d.exec(nil, `document.getElementById("attrs").value = ""`)
	d.sendKeys("#attrs", "path=/login\nmethod=POST\nusername=alice\nip=192.0.2.1")
	d.sendKeys("#cost", "2")
	type shown struct {
		Classes []string
		Decider string
		Rules   []string
		Marked  []string
	}
	var got shown
	for i := 1; i <= 3; i++ {
		d.click("#decide")
		d.waitFor("decision "+strconv.Itoa(i), &got, `
			const ds = document.querySelectorAll("#output .decision");
			if (ds.length !== arguments[0]) return null;
			return {classes: [...ds].map((d) => d.className), decider: ds[0].dataset.decider,
				rules: [...ds[0].querySelectorAll("tbody tr")].map((r) => r.dataset.rule),
				marked: [...ds[0].querySelectorAll("tbody tr.mark")].map((r) => r.dataset.rule)}`, i)
	}
	if want := []string{"decision denied", "decision allowed", "decision allowed"}; !slices.Equal(got.Classes, want) || got.Decider != "login.per_account" ||
		!slices.Equal(got.Rules, []string{"login.per_ip", "login.per_account", "login.all_logins"}) || !slices.Equal(got.Marked, []string{"login.per_account"}) {
		t.Errorf("three decisions shown as %+v; want two allowed, then denied by login.per_account", got)
	}
	var h3 string
	d.exec(&h3, `return document.querySelector("#output .decision h3").textContent`)
	if !strings.Contains(h3, "denied by login.per_account, retry after 3m0s") {
		t.Errorf("the denial reads %q; want its rule and a retry-after of 3 minutes", h3)
	}
	d.screenshot("4-decide")
	// A second later, still denied; Reset, and it passes again.
	d.click("#tick")
	d.click("#decide")
	d.waitFor("the decision a second later", &got, `const ds = document.querySelectorAll("#output .decision"); return ds.length === 4 && {classes: [ds[0].className], decider: ds[0].dataset.decider}`)
	if s := d.text("#output .decision h3"); got.Decider != "login.per_account" || !strings.HasPrefix(s, "#4 at 1s: ") {
		t.Errorf("a second later the decision reads %q (by %q); want #4 at 1s, denied by login.per_account", s, got.Decider)
	}
	d.click("#reset-decisions")
	d.click("#decide")
	d.waitFor("the decision after Reset", &got, `const ds = document.querySelectorAll("#output .decision"); return ds.length === 1 && {classes: [ds[0].className]}`)
	if s := d.text("#output .decision h3"); got.Classes[0] != "decision allowed" || !strings.HasPrefix(s, "#1 at 0s: ") {
		t.Errorf("after Reset the decision reads %q (%q); want #1 at 0s, allowed", s, got.Classes)
	}

	// A new policy file opens with the starter policy rlctl init writes.
	d.exec(nil, `window.prompt = (m, def) => def`)
	d.click("#add-file")
	d.waitFor("the new file", nil, `return document.querySelector(".tab.active").dataset.file === "policy.hcl" && document.getElementById("text").value === arguments[0]`, rlctl.Starter)

	// Back with unsaved edits asks, and a No keeps them at their address.
	d.exec(nil, `confirmAnswer = false`)
	d.waitFor("the new file's link", nil, `return /^#f=/.test(location.hash)`)
	var before string
	d.exec(&before, `return location.hash`)
	d.exec(nil, `history.back()`)
	d.waitFor("the question on Back", nil, `return confirms.length === 3 && location.hash === arguments[0]`, before)
	var files map[string]string
	d.exec(&files, `return state.files`)
	if _, ok := files["policy.hcl"]; !ok {
		t.Errorf("a No on Back lost the new file: the files are %q", slices.Sorted(maps.Keys(files)))
	}
	d.exec(nil, `confirmAnswer = true`)

	// The plugin example with a bug: a missing TAT no longer defaults to now.
	d.click(`#examples button[data-example="simple_gcra"]`)
	lua := "plugins/simple_gcra.lua"
	d.waitFor("the simple_gcra example", nil, `return document.querySelector('.tab[data-file="plugins/simple_gcra.lua"]') && document.getElementById("status").className === "status ok"`)
	d.click(`.tab[data-file="` + lua + `"]`)
	tokens = checkHighlight(t, d, lua)
	for class, want := range map[string]string{"tok-keyword": "local", "tok-func": "check", "tok-string": "'GET'", "tok-comment": "-- simple_gcra"} {
		if !slices.ContainsFunc(tokens[class], func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("%s's %s tokens are %q; want %s among them", lua, class, tokens[class], want)
		}
	}
	if !slices.Contains(tokens["tok-keyword"], "function") {
		t.Errorf("%s's keywords are %q; want function among them", lua, tokens["tok-keyword"])
	}
	luaSrc := exampleFiles(t, "simple_gcra")[lua]
	const fallback = " or now"
	at = strings.Index(luaSrc, "tonumber(call('GET', key))"+fallback)
	if at < 0 {
		t.Fatalf("%s has no default for a missing TAT", lua)
	}
	selectText(d, luaSrc, at+len("tonumber(call('GET', key))"), len(fallback))
	d.sendKeys("#text", "\ue003") // Backspace
	var edited string
	d.exec(&edited, `return state.files["plugins/simple_gcra.lua"]`)
	if edited != strings.Replace(luaSrc, fallback, "", 1) {
		t.Fatalf("the edit did not make the Lua expected; it is:\n%s", edited)
	}
	checkHighlight(t, d, "the Lua edited")

	// A verify with a budget too big to wait for, stopped; then one that finishes.
	d.exec(nil, `
		window.seenStatus = [];
		const s = document.getElementById("run-status");
		new MutationObserver(() => seenStatus.push(s.textContent)).observe(s, {childList: true, characterData: true, subtree: true})`)
	d.sendKeys("#budget", "10000000")
	d.click("#verify")
	d.waitFor("a long verify's progress", nil, `return /^verify: \d+ of \d+ checks$/.test(document.getElementById("run-status").textContent)`)
	d.click("#stop")
	if s := d.text("#run-status"); !strings.HasPrefix(s, "verify: stopped after ") {
		t.Errorf("after Stop the run status is %q", s)
	}
	d.exec(nil, `document.getElementById("budget").value = ""`)
	d.sendKeys("#budget", "200")
	d.click("#verify")
	var finding struct {
		Detail string
		Steps  []string
		Marked int
	}
	d.waitFor("verify's failure with its counterexample", &finding, `
		const f = document.querySelector("#output .finding.fail");
		return f && f.querySelector(".counterexample") && {detail: f.querySelector(".detail").textContent,
			steps: [...f.querySelectorAll(".counterexample tbody tr")].map((r) => r.textContent),
			marked: f.querySelectorAll(".counterexample tr.mark").length}`)
	if !strings.Contains(finding.Detail, "attempt to compare nil with number") || len(finding.Steps) == 0 || finding.Marked == 0 ||
		!strings.Contains(strings.Join(finding.Steps, "\n"), "ERROR plugins/simple_gcra.lua:") {
		t.Errorf("the failure shown: %+v; want the Lua error with a marked counterexample step", finding)
	}
	var seen []string
	d.exec(&seen, `return seenStatus`)
	if !slicesMatch(seen, `^verify: \d+ of \d+ checks$`) || !slicesMatch(seen, `^verify: done in `) {
		t.Errorf("the run status showed %q; want progress, then done", seen)
	}
	d.exec(nil, `document.querySelector("#output .finding.fail").scrollIntoView()`)
	d.screenshot("5-verify")

	// The failure's button to the Lua line that raised the error.
	errLine := strings.Count(edited[:strings.Index(edited, "if tat < now then")], "\n") + 1
	d.click("#output .finding.fail .goto")
	var cur struct {
		Tab   string
		Start int
	}
	d.exec(&cur, `return {tab: document.querySelector(".tab.active").dataset.file, start: document.getElementById("text").selectionStart}`)
	if cur.Tab != lua || cur.Start != offsetOf(edited, errLine, 1) {
		t.Errorf("the failure's source button shows %s at offset %d; want %s line %d (offset %d)", cur.Tab, cur.Start, lua, errLine, offsetOf(edited, errLine, 1))
	}
	// The editor scrolled to the line: the highlight with it.
	var scrolled int
	d.exec(&scrolled, `return document.getElementById("text").scrollTop`)
	checkHighlight(t, d, fmt.Sprintf("%s scrolled by %dpx to line %d", lua, scrolled, errLine))
	d.screenshot("5b-lua-scrolled")

	// The share link, in a fresh page: the same files.
	files = nil
	d.exec(&files, `return state.files`)
	d.click("#share")
	var link string
	d.waitFor("the share link", &link, `const i = document.getElementById("share-link"); return !i.hidden && i.value`)
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(srv.URL) + `/#f=[A-Za-z0-9_-]+$`).MatchString(link) {
		t.Fatalf("share link %q", link)
	}
	t.Logf("share link: %d characters for %d bytes of files", len(link), len(files[lua])+len(files["simple_gcra.hcl"]))
	d.navigate("about:blank")
	d.navigate(link)
	var sharedFirst float64
	d.waitFor("the shared page's first result", &sharedFirst, `return window.rlctlTiming && rlctlTiming.firstResult !== undefined && rlctlTiming.firstResult`)
	t.Logf("time to first result from the share link: %.0f ms", sharedFirst)
	var shared map[string]string
	d.exec(&shared, `return state.files`)
	if a, b := mustJSON(t, shared), mustJSON(t, files); a != b {
		t.Errorf("the shared page has the files\n%s\nwant\n%s", a, b)
	}
	d.screenshot("6-shared")

	// A link cut short: the page says so, and shows the first example.
	d.navigate("about:blank")
	d.navigate(link[:len(link)-40])
	d.waitFor("the cut link's page", nil, `return window.rlctlTiming && rlctlTiming.firstResult !== undefined`)
	if s := d.text("#output"); !strings.Contains(s, "The link's files cannot be read") {
		t.Errorf("a cut link shows %q", s)
	}
	if got := d.text(".tab.active"); got != first.Name+".hcl" {
		t.Errorf("a cut link shows the tab %q, want the first example's", got)
	}
}

// selectText focuses the editor, which holds text, and selects the n bytes from byte
// offset at, so that the keys sent next replace them.
func selectText(d *webDriver, text string, at, n int) {
	d.t.Helper()
	d.exec(nil, `const ta = document.getElementById("text"); ta.focus(); ta.setSelectionRange(arguments[0], arguments[1])`,
		jsOffset(text, at), jsOffset(text, at+n))
}

// jsOffset converts a byte offset in s to JavaScript's, in UTF-16 code units.
func jsOffset(s string, off int) int { return len(utf16.Encode([]rune(s[:off]))) }

// offsetOf is the JavaScript offset of line:column (1-based, column in characters) in text.
func offsetOf(text string, line, col int) int {
	off := 0
	for range line - 1 {
		off += strings.IndexByte(text[off:], '\n') + 1
	}
	return jsOffset(text, off) + col - 1
}

func slicesMatch(list []string, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, s := range list {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// logWasmSize logs the module's size, raw and gzipped, as the page fetches it.
func logWasmSize(t *testing.T) {
	gz, err := static.ReadFile("static/" + wasmName + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, zr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rlctl.wasm: %.1f MB raw, %.1f MB gzipped (%d and %d bytes)", float64(n)/1e6, float64(len(gz))/1e6, n, len(gz))
}

// highlightShown is what the editor's highlight layer shows, as readHighlight reads it.
type highlightShown struct {
	Same    bool                // its textContent is the editor's value
	Length  int                 // of the editor's value
	Differs int                 // where the two first differ; -1 when they do not
	Tokens  map[string][]string // the text of each token, by class: "tok-keyword" → …
	Other   []string            // elements other than a token's span: tag.class
	Style   []string            // the font and layout properties it does not share with the editor
	Off     []string            // what is not where the editor draws it
}

// readHighlightScript reads the highlight layer. Beyond its text and tokens, it checks
// that the layer lies under the editor's text: the same font, line height, padding and
// tab size; the layer's box the editor's moved by the editor's scroll; and three tokens
// (the first, one in the middle, the last) drawn on their lines, each line LINE (20px)
// high from PAD (8px) below the editor's top, less the scroll.
const readHighlightScript = `
const ta = document.getElementById("text"), hl = document.getElementById("highlight");
const a = hl.textContent, b = ta.value;
let differs = -1;
if (a !== b) for (differs = 0; differs < a.length && a[differs] === b[differs]; differs++);
const tokens = {}, other = [];
for (const e of hl.querySelectorAll("*")) {
	if (e.tagName === "DIV" && e.parentNode === hl && !e.attributes.length) continue; // a line
	if (e.tagName === "SPAN" && /^tok-[a-z]+$/.test(e.className) && !e.children.length && e.parentNode.parentNode === hl) (tokens[e.className] ||= []).push(e.textContent);
	else other.push(e.tagName + "." + e.className);
}
const hs = getComputedStyle(hl), ts = getComputedStyle(ta);
const style = ["fontFamily", "fontSize", "fontWeight", "fontStyle", "fontVariantLigatures", "lineHeight", "letterSpacing",
	"wordSpacing", "tabSize", "whiteSpace", "textIndent", "paddingTop", "paddingLeft", "borderTopWidth", "borderLeftWidth"]
	.filter((p) => hs[p] !== ts[p]).map((p) => p + ": " + hs[p] + ", the editor's " + ts[p]);
const off = [];
const hr = hl.getBoundingClientRect(), tr = ta.getBoundingClientRect();
if (Math.abs(hr.left + ta.scrollLeft - tr.left) > 0.5 || Math.abs(hr.top + ta.scrollTop - tr.top) > 0.5) {
	off.push("the layer at " + hr.left + "," + hr.top + "; the editor at " + tr.left + "," + tr.top + " scrolled by " + ta.scrollLeft + "," + ta.scrollTop);
}
const spans = [...hl.querySelectorAll("span")].filter((s) => !s.textContent.startsWith("\n"));
for (const s of [spans[0], spans[spans.length >> 1], spans[spans.length - 1]]) {
	if (!s) continue;
	const r = document.createRange();
	r.setStart(hl, 0);
	r.setEndBefore(s);
	const line = r.toString().split("\n").length;
	const box = s.getClientRects()[0];
	const mid = box.top + box.height / 2 - tr.top, want = 8 + (line - 1) * 20 + 10 - ta.scrollTop;
	if (Math.abs(mid - want) > 1) off.push(JSON.stringify(s.textContent) + " on line " + line + ": its middle " + mid + "px below the editor's top, want " + want);
}
return {same: a === b, length: b.length, differs, tokens, other, style, off};`

// checkHighlight requires the highlight layer to show the editor's text exactly, with
// tokens only, and to lie under it; it returns the tokens' texts by class. where says
// when.
func checkHighlight(t *testing.T, d *webDriver, where string) map[string][]string {
	t.Helper()
	// A key that scrolls the editor (the caret kept in view) has the browser dispatch the
	// scroll, and so the layer's syncScroll, at its next frame: read the layer once it has,
	// or after 300 frames (then what is read says what is wrong).
	d.waitFor(where+": the layer moved with the editor's scroll", nil, `
const ta = document.getElementById("text"), shift = document.getElementById("highlight").style.transform;
window.layerFrames = (window.layerFrames || 0) + 1;
if (shift === "translate(" + (-ta.scrollLeft) + "px, " + (-ta.scrollTop) + "px)" || shift === "" && ta.scrollLeft === 0 && ta.scrollTop === 0 || window.layerFrames > 300) {
  window.layerFrames = 0;
  return true;
}
return false`)
	var h highlightShown
	d.exec(&h, readHighlightScript)
	if !h.Same {
		t.Errorf("%s: the highlight layer's text is not the editor's (%d characters): they differ from offset %d", where, h.Length, h.Differs)
	}
	if len(h.Other) > 0 || len(h.Style) > 0 || len(h.Off) > 0 {
		t.Errorf("%s: the highlight layer has elements %q besides its tokens; does not share with the editor %q; is off the text: %q", where, h.Other, h.Style, h.Off)
	}
	if len(h.Tokens) == 0 {
		t.Errorf("%s: the highlight layer has no tokens", where)
	}
	return h.Tokens
}

// tokenizerCases are texts hard to split, and the tokens the page makes of them ("kind
// text", a token over several lines one a line); a nil tokens is not checked, only that
// the text comes out whole.
var tokenizerCases = []struct {
	Name   string   `json:"name"`
	Text   string   `json:"text"`
	Tokens []string `json:"-"`
}{
	{"a.hcl", "policy \"a\" {\n  x = \"${upper(\"q\")}-%{ if true }y%{ endif }$${lit}\"\n}\n", []string{
		"block policy", `string "a"`, "attr x", `string "`, "interp ${", "func upper", `string "q"`, "interp }", "string -",
		"interp %{", "keyword if", "const true", "interp }", "string y", "interp %{", "keyword endif", "interp }", `string $${lit}"`}},
	{"a.hcl", "h = <<-EOT\n  ${local.a} <b>&amp;</b>\n  EOT\nn = 1.5e3\n", []string{
		"attr h", "string <<-EOT", "string   ", "interp ${", "ref local", "interp }", "string  <b>&amp;</b>", "string EOT", "attr n", "number 1.5e3"}},
	{"a.hcl", "l = [for v in xs : upper(v) if v != \"\"] // c\n/* a\nb */ m = request.path == \"/\" # d\n", []string{
		"attr l", "keyword for", "keyword in", "func upper", "keyword if", `string ""`, "comment // c", "comment /* a", "comment b */",
		"attr m", "ref request", `string "/"`, "comment # d"}},
	// Strings left open, as while they are typed: each ends with its line.
	{"a.hcl", "x = \"abc\ny = \"${ open\npolicy \"b\" {}", []string{"attr x", `string "abc`, "attr y", `string "`, "interp ${", "block policy", `string "b"`}},
	{"a.hcl", "\n<script>alert(1)</script> & \"<i>\" /* <!-- */", []string{"func alert", "number 1", `string "<i>"`, "comment /* <!-- */"}},
	{"a.hcl", strings.Repeat(`"${`, 20000), nil},
	{"a.hcl", "x = <<EOF\nno end ${", nil},
	{"a.lua", "--[==[ long ]] ]==] x = [[a]] .. 'b\\'c' -- end\nlocal function M.f:g(a) return 0x1F + .5, nil end\ns = \"open\n", []string{
		"comment --[==[ long ]] ]==]", "string [[a]]", `string 'b\'c'`, "comment -- end", "keyword local", "keyword function",
		"func M.f:g", "keyword return", "number 0x1F", "number .5", "const nil", "keyword end", `string "open`}},
	{"a.lua", "--[[ open <b>", []string{"comment --[[ open <b>"}},
	{"notes.txt", "policy \"a\" { <b> }", []string{}},
}

// checkTokenizers runs the page's highlightHTML on tokenizerCases and requires each
// text whole, in lines and tokens only, and the tokens listed; then it highlights a
// file of 2,000 lines, and edits it, on a layer like the editor's, requiring the text
// whole after each change and logging how long that takes.
func checkTokenizers(t *testing.T, d *webDriver, policy string) {
	t.Helper()
	var got []struct {
		Same   bool
		Tokens []string
		Other  []string
	}
	d.exec(&got, `return arguments[0].map((c) => {
		const layer = document.createElement("div");
		layer.innerHTML = highlightHTML(c.name, c.text);
		const tokens = [], other = [];
		for (const e of layer.querySelectorAll("*")) {
			if (e.tagName === "DIV" && e.parentNode === layer && !e.attributes.length) continue; // a line
			if (e.tagName === "SPAN" && /^tok-[a-z]+$/.test(e.className) && !e.children.length && e.parentNode.parentNode === layer) tokens.push(e.className.slice(4) + " " + e.textContent);
			else other.push(e.tagName + "." + e.className);
		}
		return {same: layer.textContent === c.text, tokens: tokens.length > 100 ? null : tokens, other};
	})`, tokenizerCases)
	for i, c := range tokenizerCases {
		g := got[i]
		if !g.Same || len(g.Other) > 0 || (c.Tokens != nil && !slices.Equal(g.Tokens, c.Tokens)) {
			t.Errorf("highlightHTML(%q, %.60q): text whole %v, other elements %q, tokens\n%q\nwant\n%q", c.Name, c.Text, g.Same, g.Other, g.Tokens, c.Tokens)
		}
	}
	var big strings.Builder
	for big.Len() == 0 || strings.Count(big.String(), "\n") < 2000 {
		big.WriteString(policy)
	}
	// A layer like the editor's, made whole, then changed by edits as a key would: a
	// character typed, a line added at the top, ten lines removed, a comment opened
	// (every line after it changes) and closed again.
	var run struct {
		Tokens, Whole, Key float64
		Same               []bool
	}
	d.exec(&run, `const text = arguments[0], probe = document.createElement("div");
		probe.style.cssText = "position: absolute; inset: 0; padding: 8px; visibility: hidden; white-space: pre; tab-size: 2";
		document.querySelector(".code").prepend(probe);
		const time = (f) => { const start = performance.now(); f(); probe.getBoundingClientRect(); return performance.now() - start; };
		const mid = text.indexOf("\n", text.length >> 1), tenth = text.indexOf("\n", text.length >> 3);
		let lines = [], now = text;
		const show = (t) => { now = t; lines = updateLayer(probe, lines, highlightLines("big.hcl", t)); return probe.textContent === t; };
		const out = {tokens: time(() => highlightLines("big.hcl", text)), whole: time(() => show(text)), same: [probe.textContent === text]};
		out.key = time(() => show(text.slice(0, mid) + "x" + text.slice(mid)));
		out.same.push(probe.textContent === now);
		out.same.push(show("# top\n" + now));
		out.same.push(show(now.split("\n").filter((l, i) => i < 100 || i >= 110).join("\n")));
		out.same.push(show(now.slice(0, tenth) + "/*" + now.slice(tenth)));
		out.same.push(show(now.slice(0, tenth) + now.slice(tenth + 2)));
		probe.remove();
		return out`, big.String())
	lines := strings.Count(big.String(), "\n")
	t.Logf("highlighting %d lines (%d bytes): tokens %.1f ms; the layer made whole %.1f ms, after a key %.1f ms", lines, big.Len(), run.Tokens, run.Whole, run.Key)
	if slices.Contains(run.Same, false) {
		t.Errorf("a layer of %d lines, made whole and then edited, does not hold the text after each change: %v", lines, run.Same)
	}
	// The times are logged, not asserted: this machine is shared and its speed varies.
}

// referenceShown is what the quick reference panel shows.
type referenceShown struct {
	Visible  bool     // not hidden, and of some height
	Expanded string   // the button's aria-expanded
	Topics   []string // its tabs
	Selected string   // the chosen tab's topic
	Text     string   // the text under them
	Focused  string   // the id of the element with the focus
}

const readReferenceScript = `
const p = document.getElementById("reference"), sel = p.querySelector('.topic[aria-selected="true"]');
return {visible: !p.hidden && p.getBoundingClientRect().height > 0,
	expanded: document.getElementById("reference-toggle").getAttribute("aria-expanded"),
	topics: [...p.querySelectorAll(".topic")].map((b) => b.dataset.topic), selected: sel && sel.dataset.topic,
	text: document.getElementById("reference-text").textContent, focused: document.activeElement.id}`

// checkReference opens the quick reference, reads each topic by mouse and by keyboard
// and closes it with Escape and with its close button, requiring Reference's texts.
func checkReference(t *testing.T, d *webDriver) {
	t.Helper()
	ref := Reference()
	var names []string
	for _, topic := range ref {
		names = append(names, topic.Name)
	}
	read := func() referenceShown {
		var r referenceShown
		d.exec(&r, readReferenceScript)
		return r
	}
	d.waitFor("the reference loaded", nil, `return !document.getElementById("reference-toggle").disabled`)
	d.click("#reference-toggle")
	r := read()
	if !r.Visible || r.Expanded != "true" || !slices.Equal(r.Topics, names) || r.Selected != ref[0].Name || r.Focused != "reference-tab-"+ref[0].Name {
		t.Errorf("the reference opened shows %+v; want it visible with the topics %q, %s chosen and focused", r, names, ref[0].Name)
	}
	if r.Text != ref[0].Text {
		t.Errorf("the reference's %s reads\n%.300s\nwant Reference()[0].Text:\n%.300s", ref[0].Name, r.Text, ref[0].Text)
	}
	d.screenshot("1-reference")
	d.click(`.topic[data-topic="` + ref[1].Name + `"]`)
	if r = read(); r.Selected != ref[1].Name || r.Text != ref[1].Text {
		t.Errorf("a click on %s shows %s:\n%.300s\nwant Reference()[1].Text:\n%.300s", ref[1].Name, r.Selected, r.Text, ref[1].Text)
	}
	d.sendKeys(`.topic[data-topic="`+ref[1].Name+`"]`, "\ue014") // the right arrow
	if r = read(); r.Selected != ref[2].Name || r.Text != ref[2].Text || r.Focused != "reference-tab-"+ref[2].Name {
		t.Errorf("the right arrow from %s shows %s (focus on %q):\n%.300s\nwant %s, focused, and Reference()[2].Text", ref[1].Name, r.Selected, r.Focused, r.Text, ref[2].Name)
	}
	d.sendKeys("#reference-text", "\ue00c") // Escape
	if r = read(); r.Visible || r.Expanded != "false" || r.Focused != "reference-toggle" {
		t.Errorf("after Escape the reference is %+v; want it hidden, the focus back on its button", r)
	}
	d.click("#reference-toggle")
	if r = read(); !r.Visible || r.Selected != ref[2].Name {
		t.Errorf("opened again, the reference shows %+v; want it visible at %s, as it was left", r, ref[2].Name)
	}
	d.click("#reference-close")
	if r = read(); r.Visible || r.Expanded != "false" {
		t.Errorf("after its close button the reference is %+v; want it hidden", r)
	}
}
