// app.js is the rlctl playground's page: an editor for a set of files (policies and the
// Lua of their plugins, one tab each), their diagnostics as you type, and rlctl simulate
// and verify run on them. rlctl itself is rlctl.wasm, compiled here once and run in two
// workers (worker.js): "live" validates and formats, "run" simulates and verifies, so that
// typing is checked while a long verify runs, and Stop can end a run by terminating its
// worker. The files travel in the URL's fragment, #f= and the files' JSON compressed
// (deflate-raw) in base64url: once they are edited, or an example chosen, the address is a
// link to what is in the editor, and Share copies it. An example chosen is #example=NAME,
// a history entry of its own: Back and Forward bring the examples and links back. Files
// that differ from those last loaded or shared are unsaved edits: replacing them asks
// first, and leaving the page warns. The request panel decides one request at a time on
// the files (decide, on the live worker), charged in a state that the decisions share.
// The editor colours HCL and Lua as they are typed, on a layer under the textarea; the
// Reference button opens the language's short references, what rlctl help prints.
"use strict";

const $ = (id) => document.getElementById(id);

// The editor's geometry, as style.css sets it: line height and padding, in px.
const LINE = 20;
const PAD = 8;
// How long typing must pause before the files are validated, in ms.
const DEBOUNCE = 300;

// state is what the editor holds (the browser test reads state.files).
const state = {
  files: {}, // name → text
  active: "", // the file in the editor
  diagnostics: [], // the latest validate's
};

// rlctlTiming holds when things happened, in ms since the page's navigation started
// (performance.now()): compiled (the module), ready (the live worker), examples (their
// files received), firstResult (the first validate result shown). The browser test reads
// it.
const timing = (window.rlctlTiming = {});

let module = null; // the compiled rlctl.wasm
let live = null; // Runner for validate and format
let runner = null; // Runner for simulate and verify
let running = null; // {what, started} while a run is under way

// A Runner is one worker.js running the module. call(method, args, onProgress) resolves
// to the method's parsed JSON result; a worker that fails or is terminated rejects its
// pending calls.
class Runner {
  constructor(name) {
    this.pending = new Map();
    this.next = 1;
    this.dead = "";
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => {});
    this.worker = new Worker("worker.js", { name });
    this.worker.onmessage = (e) => this.receive(e.data);
    this.worker.onerror = (e) => this.fail(e.message || "the worker failed");
    this.worker.postMessage({ module });
  }

  receive(m) {
    if (m.ready) {
      this.resolveReady();
      return;
    }
    if (m.failed) {
      this.fail(m.failed);
      return;
    }
    const p = this.pending.get(m.id);
    if (!p) return;
    if (m.progress) {
      if (p.onProgress) p.onProgress(m.progress[0], m.progress[1]);
      return;
    }
    this.pending.delete(m.id);
    try {
      p.resolve(JSON.parse(m.result));
    } catch (err) {
      p.reject(new Error("rlctl returned no JSON: " + err.message));
    }
  }

  fail(why) {
    this.dead = why;
    this.rejectReady(new Error(why));
    for (const p of this.pending.values()) p.reject(new Error(why));
    this.pending.clear();
  }

  call(method, args, onProgress) {
    if (this.dead) return Promise.reject(new Error(this.dead));
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onProgress });
      this.worker.postMessage({ id, method, args });
    });
  }

  terminate(why) {
    this.worker.terminate();
    this.fail(why);
  }
}

// el makes an element: attributes (class, on* listeners, others as attributes; false and
// null left out) and children (strings become text, never markup).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v == null) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  e.append(...children.flat().filter((c) => c != null && c !== false));
  return e;
}

// ---- files ----

const isPolicy = (name) => /\.(hcl|json)$/.test(name);

// names returns the file names, policy files first, each group sorted.
function names() {
  return Object.keys(state.files).sort((a, b) => (isPolicy(b) - isPolicy(a)) || (a < b ? -1 : a > b ? 1 : 0));
}

// sortedFiles returns the files as an object with its keys in sorted order, so that the
// same files give the same JSON and the same link.
function sortedFiles() {
  const out = {};
  for (const n of Object.keys(state.files).sort()) out[n] = state.files[n];
  return out;
}

const filesJSON = () => JSON.stringify(sortedFiles());

// saved is the JSON of the files as last loaded or shared, and origin the address's
// fragment for them ("#example=NAME", "#f=…"; "" for the page's first example): files
// that differ from saved are unsaved edits.
let saved = "";
let origin = "";

const edited = () => filesJSON() !== saved;

// mayReplace asks before the files in the editor are replaced, when they hold unsaved
// edits; it returns whether to go on.
function mayReplace() {
  return !edited() || confirm("Replace the files in the editor? Your edits to them are not saved: Share makes a link that keeps them.");
}

// setFiles replaces every file and shows active (the first policy file by default).
function setFiles(files, active) {
  state.files = { ...files };
  saved = filesJSON();
  linkSeq++; // a link on its way is to files no longer in the editor
  forgetDecisions();
  state.active = active in state.files ? active : names()[0] || "";
  state.diagnostics = [];
  showActive();
  renderTabs();
  renderDiagnostics();
  renderScenarios();
}

function switchTo(name) {
  if (!(name in state.files) || name === state.active) return;
  state.active = name;
  showActive();
  renderTabs();
}

function showActive() {
  const ta = $("text");
  ta.value = state.files[state.active] ?? "";
  ta.disabled = !state.active;
  ta.scrollTop = 0;
  ta.scrollLeft = 0;
  renderHighlight();
  renderGutter(true);
  renderMarks();
  syncScroll();
}

// changed is every change to the files: they are validated once typing pauses, and the
// address becomes their link.
function changed() {
  renderScenarios();
  scheduleValidate();
}

// addFile asks for a name and opens the new file: a policy file (.hcl) with the starter
// policy rlctl init writes.
async function addFile() {
  let suggest = "policy.hcl";
  for (let i = 2; suggest in state.files; i++) suggest = `policy${i}.hcl`;
  const name = (prompt("File name (a policy ends in .hcl and starts as rlctl init's; a plugin's Lua, as its source attribute names it):", suggest) || "").trim();
  if (!name) return;
  if (name in state.files) {
    switchTo(name);
    return;
  }
  let text = "";
  try {
    text = await live.call("newFile", [name]);
  } catch (err) {
    setStatus("error", "new file: " + err.message);
  }
  if (name in state.files) return;
  state.files[name] = typeof text === "string" ? text : "";
  switchTo(name);
  changed();
}

function removeFile() {
  const name = state.active;
  if (!name || !confirm(`Remove ${name}?`)) return;
  delete state.files[name];
  state.active = names()[0] || "";
  showActive();
  renderTabs();
  changed();
}

function renameFile(name) {
  const to = (prompt(`Rename ${name} to:`, name) || "").trim();
  if (!to || to === name || to in state.files) return;
  state.files[to] = state.files[name];
  delete state.files[name];
  state.active = to;
  renderHighlight(); // another name may be another language
  renderTabs();
  changed();
}

function renderTabs() {
  const counts = {};
  for (const d of state.diagnostics) {
    if (!d.file) continue;
    const c = (counts[d.file] ||= { error: 0, warning: 0 });
    c[d.severity === "error" ? "error" : "warning"]++;
  }
  $("tabs").replaceChildren(...names().map((n) => {
    const c = counts[n];
    const badge = c && (c.error || c.warning)
      ? el("span", { class: "badge " + (c.error ? "error" : "warning"), title: `${c.error} errors, ${c.warning} warnings` }, String(c.error || c.warning))
      : null;
    return el("button", {
      class: "tab" + (n === state.active ? " active" : ""), role: "tab", "aria-selected": n === state.active ? "true" : "false",
      "data-file": n, title: "Double-click to rename", onclick: () => switchTo(n), ondblclick: () => renameFile(n),
    }, n, badge);
  }));
  $("remove-file").disabled = !state.active;
}

// ---- the editor ----

function lineCount(text) {
  let n = 1;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) n++;
  return n;
}

// lineMarks returns, for the active file, each line's worst severity.
function lineMarks() {
  const marks = new Map();
  for (const d of state.diagnostics) {
    if (d.file !== state.active || !d.line) continue;
    const end = Math.max(d.line, d.end_column > 1 ? d.end_line : d.end_line - 1);
    for (let l = d.line; l <= end; l++) {
      if (marks.get(l) !== "error") marks.set(l, d.severity === "error" ? "error" : "warning");
    }
  }
  return marks;
}

let gutterLines = -1;

function renderGutter(force) {
  const n = lineCount($("text").value);
  if (n === gutterLines && !force) return;
  gutterLines = n;
  const marks = lineMarks();
  const rows = [];
  for (let l = 1; l <= n; l++) rows.push(el("div", { class: marks.has(l) ? "ln " + marks.get(l) : "ln" }, String(l)));
  $("gutter").replaceChildren(...rows);
}

// renderMarks draws the active file's diagnostics behind the text: a band on each line
// and a wavy line under the construct, from its column.
function renderMarks() {
  const text = $("text").value;
  const lines = text.split("\n");
  const out = [];
  for (const d of state.diagnostics) {
    if (d.file !== state.active || !d.line || d.line > lines.length) continue;
    const sev = d.severity === "error" ? "error" : "warning";
    const end = Math.max(d.line, d.end_column > 1 ? d.end_line : d.end_line - 1);
    out.push(el("div", { class: "band " + sev, style: `top:${PAD + (d.line - 1) * LINE}px;height:${(end - d.line + 1) * LINE}px` }));
    const width = Array.from(lines[d.line - 1]).length;
    const from = Math.min(Math.max(d.column, 1), width + 1);
    const to = d.end_line === d.line && d.end_column > from ? d.end_column : width + 1;
    out.push(el("div", {
      class: "squiggle " + sev,
      style: `top:${PAD + (d.line - 1) * LINE}px;left:calc(${PAD}px + ${from - 1}ch);width:${Math.max(to - from, 1)}ch`,
    }));
  }
  $("marks").replaceChildren(...out);
}

function syncScroll() {
  const ta = $("text");
  $("gutter").style.transform = `translateY(${-ta.scrollTop}px)`;
  const shift = `translate(${-ta.scrollLeft}px, ${-ta.scrollTop}px)`;
  $("marks").style.transform = shift;
  $("highlight").style.transform = shift;
}

// offsetOf returns the index in text of line:column (1-based, column in characters).
function offsetOf(text, line, column) {
  let off = 0;
  for (let l = 1; l < line; l++) {
    const nl = text.indexOf("\n", off);
    if (nl < 0) return text.length;
    off = nl + 1;
  }
  for (let c = 1; c < column && off < text.length && text[off] !== "\n"; c++) {
    off += text.codePointAt(off) > 0xffff ? 2 : 1;
  }
  return off;
}

// goTo shows file and puts the cursor at line:column.
function goTo(file, line, column) {
  if (!(file in state.files)) return;
  switchTo(file);
  const ta = $("text");
  const off = offsetOf(ta.value, line, column || 1);
  ta.focus();
  ta.setSelectionRange(off, off);
  ta.scrollTop = Math.max(0, PAD + (line - 1) * LINE - ta.clientHeight / 3);
  syncScroll();
}

function onInput() {
  state.files[state.active] = $("text").value;
  renderHighlight();
  renderGutter();
  changed();
}

// onKeyDown makes Tab indent by two spaces (Shift+Tab still leaves the editor).
function onKeyDown(e) {
  if (e.key === "Tab" && !e.shiftKey && !e.ctrlKey && !e.altKey && !e.metaKey) {
    e.preventDefault();
    document.execCommand("insertText", false, "  ");
  }
}

// ---- highlighting ----

// The highlight layer (#highlight) draws the active file's text in colour under the
// editor, whose own text is transparent. The layer's textContent is always the editor's
// value, character for character, in the same font, padding and tab size, so that each
// token lies exactly under its characters. It holds one <div> a line, the line's newline
// included (a block's last newline makes no line of its own); nothing is added for a
// last empty line: the layer does not scroll, syncScroll moves it, so its own height
// does not matter. An edit remakes only the lines from the first whose markup changed
// to the last, so that typing in a long file stays quick.
//
// highlightLines(name, text) returns the markup of each line of a file called name:
// its text, HTML-escaped, with its tokens in <span class="tok-KIND"> elements (a token
// over several lines is cut at each newline) and no other markup. highlightHTML(name,
// text) is the layer's whole markup, each line in its <div>. Policy files (.hcl, and
// .json, whose strings are HCL templates too) and Lua files (.lua) have tokens; any other
// file is plain text. The kinds are
//   comment  string  number
//   interp   the ${ } and %{ } around a template's expression (the expression inside is
//            highlighted as one)
//   const    true false null (Lua: true false nil)
//   keyword  HCL's for in if (else endif endfor in a %{ } directive); Lua's keywords
//   block    an HCL block's type: an identifier followed by a quoted label or {
//   attr     an HCL attribute's name: an identifier followed by = (not == or =>)
//   func     a function called (an identifier followed by "("); Lua: the name after
//            function
//   ref      request, local and param followed by a dot
// The tokenizers make one pass over the text with no backtracking. Should one throw,
// the text is shown plain.

const htmlEscapes = { "&": "&amp;", "<": "&lt;", ">": "&gt;" };
const escapeHTML = (s) => s.replace(/[&<>]/g, (c) => htmlEscapes[c]);

// A Painter collects a text's tokens: token(kind, from, to) marks text[from:to]; the text
// between tokens is plain. Tokens are taken in order; a token that starts before the end
// of the last is cut to start there, so that every character is written once. A token
// right after one of its kind joins it (but for interp: each ${, %{ and } is one).
class Painter {
  constructor(text) {
    this.text = text;
    this.pos = 0;
    this.tokens = []; // [kind, from, to]
  }

  token(kind, from, to) {
    from = Math.max(from, this.pos);
    to = Math.min(to, this.text.length);
    if (to <= from) return;
    const last = this.tokens[this.tokens.length - 1];
    if (last && last[2] === from && last[0] === kind && kind !== "interp") last[2] = to;
    else this.tokens.push([kind, from, to]);
    this.pos = to;
  }

  // lines returns the markup of each line, its newline included.
  lines() {
    const text = this.text;
    const out = [];
    let line = "";
    let at = 0;
    let nl = text.indexOf("\n");
    // add adds text[at:to] as kind ("" for plain), cut at its newlines.
    const add = (kind, to) => {
      while (at < to) {
        const end = nl >= 0 && nl < to ? nl : to;
        if (end > at) {
          const s = escapeHTML(text.slice(at, end));
          line += kind ? `<span class="tok-${kind}">${s}</span>` : s;
          at = end;
        }
        if (at === nl && at < to) {
          out.push(line + "\n");
          line = "";
          at++;
          nl = text.indexOf("\n", at);
        }
      }
    };
    for (const [kind, from, to] of this.tokens) {
      add("", from);
      add(kind, to);
    }
    add("", text.length);
    out.push(line);
    return out;
  }
}

// Character classes, on char codes.
const isDigit = (c) => c >= 48 && c <= 57;
const isLetter = (c) => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95; // a-z A-Z _
const isHex = (c) => isDigit(c) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70);
const isBlank = (c) => c === 32 || c === 9; // space, tab

function highlightLines(name, text) {
  try {
    if (/\.(hcl|json)$/.test(name)) return highlightHCL(text).lines();
    if (name.endsWith(".lua")) return highlightLua(text).lines();
  } catch (err) {
    console.error("rlctl playground: highlighting", name, err);
  }
  return new Painter(text).lines();
}

const highlightHTML = (name, text) => highlightLines(name, text).map((l) => `<div>${l}</div>`).join("");

// numberEnd returns where the decimal number that starts at i (a digit) ends: digits, a
// fraction, an exponent.
function numberEnd(text, i) {
  const n = text.length;
  while (i < n && isDigit(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) === 46 && isDigit(text.charCodeAt(i + 1))) { // .
    i += 2;
    while (i < n && isDigit(text.charCodeAt(i))) i++;
  }
  const e = text.charCodeAt(i);
  if (e === 101 || e === 69) { // e E
    let j = i + 1;
    const s = text.charCodeAt(j);
    if (s === 43 || s === 45) j++; // + -
    if (isDigit(text.charCodeAt(j))) {
      i = j + 1;
      while (i < n && isDigit(text.charCodeAt(i))) i++;
    }
  }
  return i;
}

const hclConsts = new Set(["true", "false", "null"]);
const hclKeywords = new Set(["for", "in", "if"]);
const hclDirectiveKeywords = new Set(["for", "in", "if", "else", "endif", "endfor"]);
const hclRefs = new Set(["request", "local", "param"]);
const heredocStart = /<<-?([A-Za-z_][A-Za-z0-9_-]*)\r?\n/y;

// highlightHCL returns the Painter of text, HCL's native syntax, tokenized with a stack of the contexts open: an
// expression (the file's top level, or one inside a template's ${ } or %{ }), a quoted
// template, a heredoc's template. An interpolation in a quoted template ends with its
// line, as the string does, so that a string being typed colours one line, not the rest
// of the file.
function highlightHCL(text) {
  const p = new Painter(text);
  const n = text.length;
  // expr: {expr: true, depth (the braces opened inside it), interp (inside ${ } or %{ }),
  // directive (%{ }), quoted (the interp of a quoted template)}; quoted: {quoted: true,
  // start (where its opening quote is, until the string's first part is marked)};
  // heredoc: {marker}.
  const stack = [{ expr: true, depth: 0 }];
  let i = 0;
  while (i < n) {
    const ctx = stack[stack.length - 1];
    if (ctx.expr) i = hclExpr(text, i, p, stack, ctx);
    else if (ctx.quoted) i = hclQuoted(text, i, p, stack, ctx);
    else i = hclHeredoc(text, i, p, stack, ctx);
  }
  return p;
}

// hclTemplatePart handles what starts at j in a template: an escaped $${ or %%{ (it
// returns j + 3), or a ${ or %{ that opens an interpolation (it marks the literal text
// from `from` and the delimiter, pushes the expression and returns -(j + 2)); else 0.
function hclTemplatePart(text, from, j, p, stack, quoted) {
  const c = text.charCodeAt(j);
  if (c !== 36 && c !== 37) return 0; // $ %
  const d = text.charCodeAt(j + 1);
  if (d === c && text.charCodeAt(j + 2) === 123) return j + 3;
  if (d !== 123) return 0; // {
  p.token("string", from, j);
  p.token("interp", j, j + 2);
  stack.push({ expr: true, depth: 0, interp: true, directive: c === 37, quoted });
  return -(j + 2);
}

function hclQuoted(text, i, p, stack, ctx) {
  const n = text.length;
  let j = i;
  if (ctx.start >= 0) { // the opening quote belongs to the string's first part
    i = ctx.start;
    ctx.start = -1;
  }
  while (j < n) {
    const c = text.charCodeAt(j);
    if (c === 34) { // "
      p.token("string", i, j + 1);
      stack.pop();
      return j + 1;
    }
    if (c === 10) break; // a string left open ends with its line
    if (c === 92) { // \ and the character it escapes
      j += text.charCodeAt(j + 1) === 10 ? 1 : 2;
      continue;
    }
    const t = hclTemplatePart(text, i, j, p, stack, true);
    if (t < 0) return -t;
    j = t > 0 ? t : j + 1;
  }
  p.token("string", i, j);
  stack.pop();
  return Math.min(j, n);
}

function hclHeredoc(text, i, p, stack, ctx) {
  const n = text.length;
  if (i > 0 && text.charCodeAt(i - 1) === 10) { // a line's start: the closing marker?
    let k = i;
    while (k < n && isBlank(text.charCodeAt(k))) k++;
    const e = k + ctx.marker.length;
    const after = text.charCodeAt(e);
    if (text.startsWith(ctx.marker, k) && (e === n || after === 10 || after === 13)) {
      p.token("string", k, e);
      stack.pop();
      return e;
    }
  }
  let j = i;
  while (j < n) {
    if (text.charCodeAt(j) === 10) {
      p.token("string", i, j + 1);
      return j + 1;
    }
    const t = hclTemplatePart(text, i, j, p, stack, false);
    if (t < 0) return -t;
    j = t > 0 ? t : j + 1;
  }
  p.token("string", i, n);
  return n;
}

function hclExpr(text, i, p, stack, ctx) {
  const n = text.length;
  const c = text.charCodeAt(i);
  const next = text.charCodeAt(i + 1);
  if (c === 10 && ctx.quoted) { // the line ends the interpolation and its string
    stack.length -= 2;
    return i;
  }
  if (c === 35 || (c === 47 && next === 47)) { // # //
    let j = text.indexOf("\n", i);
    if (j < 0) j = n;
    p.token("comment", i, j);
    return j;
  }
  if (c === 47 && next === 42) { // /*
    const j = text.indexOf("*/", i + 2);
    const end = j < 0 ? n : j + 2;
    p.token("comment", i, end);
    return end;
  }
  if (c === 34) { // "
    stack.push({ quoted: true, start: i });
    return i + 1;
  }
  if (c === 60 && next === 60) { // <<
    heredocStart.lastIndex = i;
    const m = heredocStart.exec(text);
    if (m) {
      const end = i + m[0].length - (m[0].endsWith("\r\n") ? 2 : 1);
      p.token("string", i, end);
      stack.push({ marker: m[1] });
      return end;
    }
    return i + 2;
  }
  if (c === 123) { // {
    ctx.depth++;
    return i + 1;
  }
  if (c === 125) { // }
    if (ctx.interp && ctx.depth === 0) {
      p.token("interp", i, i + 1);
      stack.pop();
      return i + 1;
    }
    if (ctx.depth > 0) ctx.depth--;
    return i + 1;
  }
  if (isDigit(c)) {
    const end = numberEnd(text, i);
    p.token("number", i, end);
    return end;
  }
  if (!isLetter(c)) return i + 1;
  let j = i + 1;
  for (let d = text.charCodeAt(j); j < n && (isLetter(d) || isDigit(d) || d === 45); d = text.charCodeAt(++j)); // HCL names may hold -
  const word = text.slice(i, j);
  let k = j;
  while (k < n && isBlank(text.charCodeAt(k))) k++;
  const after = text.charCodeAt(k);
  const after2 = text.charCodeAt(k + 1);
  let kind = "";
  if (after === 61 && after2 !== 61 && after2 !== 62) kind = "attr"; // = but not == or =>
  else if (after === 40) kind = "func"; // (
  else if (hclConsts.has(word)) kind = "const";
  else if ((ctx.directive ? hclDirectiveKeywords : hclKeywords).has(word)) kind = "keyword";
  else if (!ctx.interp && (after === 34 || after === 123)) kind = "block"; // " {
  else if (k === j && after === 46 && hclRefs.has(word)) kind = "ref"; // .
  if (kind) p.token(kind, i, j);
  return j;
}

const luaKeywords = new Set(["and", "break", "do", "else", "elseif", "end", "for", "function", "goto", "if", "in",
  "local", "not", "or", "repeat", "return", "then", "until", "while"]);
const luaConsts = new Set(["true", "false", "nil"]);

// longBracket returns the closing bracket of the long bracket that opens at i in text
// ([[, [=[, [==[ …: "]]", "]=]", "]==]"), or "" when none opens there; open is set to the
// opening bracket's length.
function longBracket(text, i, open) {
  if (text.charCodeAt(i) !== 91) return ""; // [
  let j = i + 1;
  while (text.charCodeAt(j) === 61) j++; // =
  if (text.charCodeAt(j) !== 91) return "";
  open.length = j + 1 - i;
  return "]" + "=".repeat(j - i - 1) + "]";
}

// highlightLua returns the Painter of text, Lua 5.1 as the plugins' scripts are written.
function highlightLua(text) {
  const p = new Painter(text);
  const n = text.length;
  const open = { length: 0 };
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 45 && text.charCodeAt(i + 1) === 45) { // --
      const close = longBracket(text, i + 2, open);
      let end;
      if (close) {
        const j = text.indexOf(close, i + 2 + open.length);
        end = j < 0 ? n : j + close.length;
      } else {
        end = text.indexOf("\n", i);
        if (end < 0) end = n;
      }
      p.token("comment", i, end);
      i = end;
      continue;
    }
    if (c === 91) { // [
      const close = longBracket(text, i, open);
      if (close) {
        const j = text.indexOf(close, i + open.length);
        const end = j < 0 ? n : j + close.length;
        p.token("string", i, end);
        i = end;
        continue;
      }
      i++;
      continue;
    }
    if (c === 34 || c === 39) { // " '
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === c) {
          j++;
          break;
        }
        if (d === 10) break; // a string left open ends with its line
        j += d === 92 ? 2 : 1; // \ and the character it escapes
      }
      p.token("string", i, j);
      i = Math.min(j, n);
      continue;
    }
    if (isDigit(c) || (c === 46 && isDigit(text.charCodeAt(i + 1)) && text.charCodeAt(i - 1) !== 46)) {
      let j;
      const x = text.charCodeAt(i + 1);
      if (c === 48 && (x === 120 || x === 88)) { // 0x
        j = i + 2;
        for (let d = text.charCodeAt(j); j < n && (isHex(d) || d === 46); d = text.charCodeAt(++j));
      } else if (c === 46) {
        j = numberEnd(text, i + 1);
      } else {
        j = numberEnd(text, i);
      }
      p.token("number", i, j);
      i = j;
      continue;
    }
    if (!isLetter(c)) {
      i++;
      continue;
    }
    let j = i + 1;
    for (let d = text.charCodeAt(j); j < n && (isLetter(d) || isDigit(d)); d = text.charCodeAt(++j));
    const word = text.slice(i, j);
    if (luaKeywords.has(word)) {
      p.token("keyword", i, j);
      if (word === "function") { // its name: a, a.b, a:b
        let k = j;
        while (k < n && isBlank(text.charCodeAt(k))) k++;
        let e = k;
        while (isLetter(text.charCodeAt(e))) {
          e++;
          for (let d = text.charCodeAt(e); e < n && (isLetter(d) || isDigit(d)); d = text.charCodeAt(++e));
          const sep = text.charCodeAt(e);
          if ((sep !== 46 && sep !== 58) || !isLetter(text.charCodeAt(e + 1))) break; // . :
          e++;
        }
        if (e > k) {
          p.token("func", k, e);
          j = e;
        }
      }
    } else if (luaConsts.has(word)) {
      p.token("const", i, j);
    } else {
      let k = j;
      while (k < n && isBlank(text.charCodeAt(k))) k++;
      if (text.charCodeAt(k) === 40) p.token("func", i, j); // (
    }
    i = j;
  }
  return p;
}

// updateLayer makes layer, which shows the lines shown (each line's markup in a <div>),
// show lines instead: the lines from the first that differs to the last are made anew.
// It returns lines.
function updateLayer(layer, shown, lines) {
  let a = 0;
  const max = Math.min(shown.length, lines.length);
  while (a < max && shown[a] === lines[a]) a++;
  let b = 0; // lines the same at the end, after a
  while (b < max - a && shown[shown.length - 1 - b] === lines[lines.length - 1 - b]) b++;
  const kids = layer.children;
  const after = kids[shown.length - b] || null;
  if (a < shown.length - b) {
    const gone = document.createRange();
    gone.setStartBefore(kids[a]);
    if (after) gone.setEndBefore(after);
    else gone.setEndAfter(layer.lastChild);
    gone.deleteContents();
  }
  if (a < lines.length - b) {
    const made = document.createElement("template");
    made.innerHTML = lines.slice(a, lines.length - b).map((l) => `<div>${l}</div>`).join("");
    layer.insertBefore(made.content, after);
  }
  return lines;
}

// highlighted is what the layer shows: the file and text it was made for, and the
// markup of each line.
let highlighted = { name: null, text: null, lines: [] };

// renderHighlight makes the highlight layer show the editor's text, unless it does.
function renderHighlight() {
  const text = $("text").value;
  if (highlighted.name === state.active && highlighted.text === text) return;
  const layer = $("highlight");
  const shown = layer.children.length === highlighted.lines.length ? highlighted.lines : [];
  if (!shown.length) layer.replaceChildren();
  highlighted = { name: state.active, text, lines: updateLayer(layer, shown, highlightLines(state.active, text)) };
}

// ---- validate ----

let validateTimer = 0;
let validateSeq = 0;

function scheduleValidate() {
  clearTimeout(validateTimer);
  validateTimer = setTimeout(validateNow, DEBOUNCE);
}

async function validateNow() {
  clearTimeout(validateTimer);
  if (!live) return;
  const seq = ++validateSeq;
  const files = sortedFiles();
  let res;
  try {
    res = await live.call("validate", [JSON.stringify(files)]);
  } catch (err) {
    if (live.dead) live = new Runner("live"); // a module that died: start again
    if (seq === validateSeq) setStatus("error", "validate: " + err.message);
    return;
  }
  if (seq !== validateSeq) return; // a newer validate is on its way
  state.diagnostics = res.diagnostics || [];
  const warnings = state.diagnostics.some((d) => d.severity !== "error");
  if (res.error) setStatus("error", "validate: " + res.error);
  else setStatus(res.ok ? (warnings ? "warning" : "ok") : "error", res.summary);
  renderDiagnostics();
  renderGutter(true);
  renderMarks();
  renderTabs();
  updateLink(files);
  if (timing.firstResult === undefined) {
    timing.firstResult = performance.now();
    console.log(`rlctl playground: first result ${Math.round(timing.firstResult)} ms after the page started loading`);
  }
}

function setStatus(kind, text) {
  const s = $("status");
  s.className = "status " + kind;
  s.textContent = text;
}

function renderDiagnostics() {
  $("diagnostics").replaceChildren(...state.diagnostics.map((d) => {
    const where = d.file ? `${d.file}:${d.line}:${d.column}` : "";
    const li = el("li", { class: "diagnostic " + d.severity, tabindex: d.file ? "0" : false, "data-file": d.file, "data-line": d.line, "data-column": d.column },
      el("div", { class: "head" },
        el("span", { class: "badge " + d.severity }, d.severity),
        where && el("span", { class: "where" }, where),
        el("span", { class: "summary" }, d.summary)),
      d.detail && el("div", { class: "detail" }, d.detail));
    if (d.file) {
      li.addEventListener("click", () => goTo(d.file, d.line, d.column));
      li.addEventListener("keydown", (e) => { if (e.key === "Enter") goTo(d.file, d.line, d.column); });
    }
    return li;
  }));
}

// ---- examples ----

let examples = []; // as the module's examples() returns them

function renderExamples() {
  const nav = $("examples");
  nav.replaceChildren(nav.firstElementChild, ...examples.map((ex) =>
    el("button", { class: "example", "data-example": ex.name, onclick: () => chooseExample(ex) }, ex.name)));
}

const exampleHash = (ex) => "#example=" + encodeURIComponent(ex.name);

// exampleOf returns the example a fragment names (#example=NAME), null when none.
function exampleOf(hash) {
  const m = /^#example=(.*)$/.exec(hash);
  if (!m) return null;
  let name = "";
  try {
    name = decodeURIComponent(m[1]);
  } catch {
    return null;
  }
  return examples.find((ex) => ex.name === name) || null;
}

// chooseExample shows ex, chosen by a click, in a history entry of its own, once unsaved
// edits may go.
function chooseExample(ex) {
  if (!mayReplace()) return;
  started.edited = true;
  linkHash = exampleHash(ex);
  history.pushState(null, "", linkHash);
  loadExample(ex, true);
}

// loadExample shows example ex: chosen (by a click or Back), its files are at its
// #example= address; as the page's first files, they have none.
function loadExample(ex, chosen) {
  setFiles(ex.files);
  origin = chosen ? exampleHash(ex) : "";
  if (chosen) {
    $("output").replaceChildren();
    $("run-status").textContent = "";
    changed();
  } else {
    validateNow();
  }
}

// onPopState shows the files of the address Back or Forward (or a fragment typed) went
// to: an example, a link's files, or the page's first example; unless the editor holds
// unsaved edits that are to stay, which keep their address.
async function onPopState() {
  const hash = location.hash;
  if (hash === linkHash) return;
  const ex = exampleOf(hash) || (hash === "" || hash === "#" ? examples[0] : null);
  if (!ex && !/^#f=/.test(hash)) return;
  if (!mayReplace()) {
    history.pushState(null, "", linkHash || location.pathname + location.search);
    return;
  }
  if (ex) {
    linkHash = hash;
    loadExample(ex, hash !== "" && hash !== "#");
    return;
  }
  const files = await filesFromLink();
  if (files) {
    setFiles(files);
    origin = hash;
    validateNow();
  }
}

// ---- the link ----

function base64url(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function unbase64url(text) {
  const s = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  const bytes = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
  return bytes;
}

async function encodeFiles(files) {
  const data = new Blob([JSON.stringify(files)]).stream().pipeThrough(new CompressionStream("deflate-raw"));
  return base64url(new Uint8Array(await new Response(data).arrayBuffer()));
}

async function decodeFiles(text) {
  const data = new Blob([unbase64url(text)]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  const files = JSON.parse(await new Response(data).text());
  if (!files || typeof files !== "object" || Array.isArray(files) || Object.values(files).some((v) => typeof v !== "string")) {
    throw new Error("the link does not hold files");
  }
  return files;
}

let linkHash = ""; // the fragment this page last wrote or read

// filesFromLink returns the files of the address's #f= fragment, null when there is none.
async function filesFromLink() {
  const m = /^#f=([A-Za-z0-9_-]*)$/.exec(location.hash);
  if (!m) return null;
  try {
    const files = await decodeFiles(m[1]);
    linkHash = location.hash;
    return files;
  } catch (err) {
    $("output").replaceChildren(el("p", { class: "error" }, `The link's files cannot be read (${err.message}): is the link cut short? The page shows an example instead.`));
    return null;
  }
}

// updateLink makes the address the link to files, once they are not the page's first:
// their origin's while they are unedited, #f= and the files otherwise.
let linkSeq = 0;
async function updateLink(files) {
  if (!started.edited && !linkHash) return;
  const json = JSON.stringify(files);
  if (json !== filesJSON()) return; // files the editor no longer holds: a late validate's
  const seq = ++linkSeq;
  const unedited = json === saved;
  const hash = unedited ? origin : "#f=" + await encodeFiles(files);
  if (seq !== linkSeq) return;
  linkHash = hash;
  if (location.hash !== hash) history.replaceState(null, "", hash || location.pathname + location.search);
}

async function share() {
  const link = location.href.split("#")[0] + "#f=" + await encodeFiles(sortedFiles());
  linkHash = link.slice(link.indexOf("#"));
  history.replaceState(null, "", linkHash);
  saved = filesJSON(); // the link keeps them
  origin = linkHash;
  const input = $("share-link");
  input.value = link;
  input.hidden = false;
  input.focus();
  input.select();
  let note = `${link.length} characters`;
  try {
    await navigator.clipboard.writeText(link);
    note += ", copied";
  } catch {
    note += ": copy it from the box";
  }
  $("share-note").textContent = note;
}

// ---- simulate and verify ----

// wholeNumber reads a field that holds a whole number: null when empty; it throws when
// the field holds anything else.
function wholeNumber(id, what) {
  const v = $(id).value.trim();
  if (v === "") return null;
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v))) throw new Error(`${what} ${JSON.stringify(v)}: want a whole number`);
  return Number(v);
}

function renderScenarios() {
  const sel = $("scenario");
  const keep = sel.value;
  const found = new Set();
  for (const [name, text] of Object.entries(state.files)) {
    if (!name.endsWith(".hcl")) continue;
    for (const m of text.matchAll(/^\s*scenario\s+"([^"]+)"/gm)) found.add(m[1]);
  }
  const have = [...sel.options].slice(1).map((o) => o.value);
  const want = [...found].sort();
  if (have.join("\n") === want.join("\n")) return;
  sel.replaceChildren(sel.options[0], ...want.map((s) => el("option", { value: s }, s)));
  sel.value = want.includes(keep) ? keep : "";
}

function setRunning(what) {
  running = what ? { what, started: performance.now() } : null;
  $("simulate").disabled = $("verify").disabled = !!what || !runner;
  $("stop").disabled = !what;
  const p = $("progress");
  p.hidden = !what;
  p.removeAttribute("value");
  document.body.classList.toggle("running", !!what);
}

const seconds = (ms) => (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s";

// run calls method on the run worker; it resolves to the result, or null when the call
// was stopped or failed (the page has said so).
async function run(what, method, args) {
  if (running) return null;
  setRunning(what);
  $("run-status").textContent = what + "…";
  const mine = running;
  try {
    const res = await runner.call(method, args, (done, total) => {
      const p = $("progress");
      p.max = total;
      p.value = done;
      $("run-status").textContent = `${what}: ${done} of ${total} checks`;
    });
    $("run-status").textContent = `${what}: done in ${seconds(performance.now() - mine.started)}`;
    return res;
  } catch (err) {
    if (running === mine) {
      $("run-status").textContent = `${what}: ${err.message}`;
      if (runner.dead) runner = new Runner("run");
    }
    return null;
  } finally {
    if (running === mine) setRunning(null);
  }
}

function stop() {
  if (!running) return;
  const { what, started } = running;
  runner.terminate("stopped");
  runner = new Runner("run");
  setRunning(null);
  $("run-status").textContent = `${what}: stopped after ${seconds(performance.now() - started)}`;
  $("output").replaceChildren(el("p", { class: "note" }, `Stopped. ${what} did not finish; a fresh worker is ready.`));
}

function optionsOrSay(read) {
  try {
    return read();
  } catch (err) {
    $("run-status").textContent = err.message;
    return null;
  }
}

async function simulate() {
  const opts = optionsOrSay(() => {
    const o = { scenario: $("scenario").value };
    const seed = wholeNumber("sim-seed", "seed");
    if (seed !== null) o.seed = seed;
    return o;
  });
  if (!opts) return;
  const res = await run("simulate", "simulate", [filesJSON(), JSON.stringify(opts)]);
  if (res) renderSimulate(res);
}

async function verify() {
  const opts = optionsOrSay(() => {
    const o = {};
    const seed = wholeNumber("verify-seed", "seed");
    if (seed !== null) o.seed = seed;
    const budget = wholeNumber("budget", "budget");
    if (budget !== null) o.budget = budget;
    const d = $("duration").value.trim();
    if (d) o.duration = d;
    return o;
  });
  if (!opts) return;
  const res = await run("verify", "verify", [filesJSON(), JSON.stringify(opts)]);
  if (res) renderVerify(res);
}

// problem shows why a run produced nothing: its error, the diagnostics, rlctl's text.
function problem(res) {
  const out = [el("p", { class: "error" }, res.error)];
  if (res.diagnostics && res.diagnostics.length) {
    out.push(el("p", {}, "The files have problems: see the diagnostics under the editor."));
    state.diagnostics = res.diagnostics;
    renderDiagnostics();
    renderGutter(true);
    renderMarks();
    renderTabs();
  }
  if (res.text) out.push(el("pre", { class: "text" }, res.text));
  return out;
}

// svgNode parses an SVG plot into a node for the page, without scripts, event handlers
// or links, whatever the policy's names hold.
function svgNode(text) {
  const svg = new DOMParser().parseFromString(text, "image/svg+xml").documentElement;
  if (svg.nodeName !== "svg") return el("p", { class: "error" }, "the plot is not SVG");
  for (const n of svg.querySelectorAll("script, foreignObject")) n.remove();
  for (const n of [svg, ...svg.querySelectorAll("*")]) {
    for (const a of [...n.attributes]) if (/^on/i.test(a.name) || /href$/i.test(a.name)) n.removeAttribute(a.name);
  }
  return document.importNode(svg, true);
}

function renderSimulate(res) {
  const out = $("output");
  if (res.error) {
    out.replaceChildren(el("h2", {}, "simulate"), ...problem(res));
    return;
  }
  if (!res.reports.length) {
    out.replaceChildren(el("h2", {}, "simulate"), el("p", { class: "note" }, "No scenario to run: add a scenario block."), res.text && el("pre", { class: "text" }, res.text));
    return;
  }
  out.replaceChildren(el("h2", {}, "simulate"), ...res.reports.map((r) =>
    el("section", { class: "report" + (r.failed ? " failed" : ""), "data-scenario": r.scenario },
      el("h3", {}, "scenario ", el("code", {}, r.scenario), " ",
        el("span", { class: "badge " + (r.failed ? "fail" : "pass") }, r.failed ? "expectation failed" : "ok")),
      el("div", { class: "plot" }, r.svg ? svgNode(r.svg) : null),
      el("pre", { class: "text" }, r.text))));
}

// duration formats nanoseconds as Go's time.Duration prints them: 2m1.552805s, 408.129ms.
function duration(ns) {
  if (ns === 0) return "0s";
  const sign = ns < 0 ? "-" : "";
  ns = Math.abs(ns);
  const frac = (v, unit) => {
    const whole = Math.floor(v / unit);
    const rest = String(v % unit).padStart(String(unit).length - 1, "0").replace(/0+$/, "");
    return rest ? `${whole}.${rest}` : String(whole);
  };
  if (ns < 1e3) return sign + ns + "ns";
  if (ns < 1e6) return sign + frac(ns, 1e3) + "µs";
  if (ns < 1e9) return sign + frac(ns, 1e6) + "ms";
  const h = Math.floor(ns / 3.6e12);
  const m = Math.floor((ns % 3.6e12) / 6e10);
  const s = frac(ns % 6e10, 1e9) + "s";
  return sign + (h ? h + "h" + m + "m" : m ? m + "m" : "") + s;
}

function counterexample(c) {
  const race = c.steps.some((s) => s.client);
  return el("table", { class: "counterexample" },
    el("caption", {}, `counterexample, shrunk from ${c.original} ${c.original === 1 ? c.unit.replace(/s$/, "") : c.unit} (times since midnight UTC; > marks the breach or the error)`),
    el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "at"), race && el("th", {}, "client"), el("th", {}, "request"), el("th", {}, "result"))),
    el("tbody", {}, c.steps.map((s) => el("tr", { class: s.mark ? "mark" : "" },
      el("td", {}, s.mark ? ">" : ""), el("td", {}, "+" + duration(s.at_ns)), race && el("td", {}, s.client ? String(s.client) : ""),
      el("td", {}, s.request), el("td", {}, s.result)))));
}

// sourceLink is a button to the file and line a script error names ("plugins/x.lua:17:
// attempt to …"), when that file is in the editor.
function sourceLink(error) {
  const m = /^(.+?):(\d+): /.exec(error || "");
  if (!m || !(m[1] in state.files)) return null;
  const [, file, line] = m;
  return el("button", { class: "goto", title: "Show the line in the editor", onclick: () => goTo(file, +line, 1) }, `${file}:${line}`);
}

const statusOrder = { fail: 0, warn: 1, note: 2, skip: 3, pass: 4 };

function renderVerify(res) {
  const out = $("output");
  const f = res.findings;
  if (!f || (res.error && !(f.results && f.results.length))) {
    out.replaceChildren(el("h2", {}, "verify"), ...problem(res.error ? res : { ...res, error: (f && f.error) || "verify did not run" }));
    return;
  }
  const counts = {};
  for (const r of f.results) counts[r.status] = (counts[r.status] || 0) + 1;
  const summary = Object.keys(statusOrder).filter((s) => counts[s]).map((s) => `${counts[s]} ${s}`).join(", ");
  const showAll = el("input", { type: "checkbox", id: "show-passing" });
  const list = el("div", { class: "findings" }, f.results.map((r) => {
    const where = r.rule ? `${r.policy} / ${r.rule}` : `${r.policy} (the whole policy)`;
    return el("div", { class: "finding " + r.status, "data-status": r.status, "data-property": r.property },
      el("div", { class: "head" },
        el("span", { class: "badge " + r.status }, r.status),
        el("span", { class: "property" }, r.property),
        el("span", { class: "where" }, where),
        r.limit && el("span", { class: "limit" }, r.algorithm ? `${r.algorithm}, ${r.limit}` : r.limit)),
      el("div", { class: "detail" }, r.detail, sourceLink(r.error)),
      r.statement && el("div", { class: "statement" }, "checks: " + r.statement),
      r.counterexample && counterexample(r.counterexample));
  }));
  showAll.addEventListener("change", () => list.classList.toggle("all", showAll.checked));
  const verdict = res.fails ? `${res.fails} failed` : res.warns ? `${res.warns} warnings` : "every property holds";
  out.replaceChildren(
    el("h2", {}, "verify"),
    el("p", { class: "verdict " + (res.fails ? "fail" : res.warns ? "warn" : "pass") },
      `${verdict}: ${f.results.length} properties (${summary}); seed ${f.seed}, ${f.budget} requests per rule, ${f.calls} script calls`),
    el("label", { class: "toggle" }, showAll, " show passing and skipped properties"),
    list,
    el("details", {}, el("summary", {}, "rlctl verify's output"), el("pre", { class: "text" }, res.text)));
}

// ---- decide ----

// decisions are those made since the state was last started over, newest first.
let decisions = [];

// readAttrs reads the request's attributes: a JSON object, or NAME=VALUE lines (blank
// lines and lines that start with # left out). It throws when the text is neither.
function readAttrs(text) {
  const attrs = {};
  if (text.trim().startsWith("{")) {
    const v = JSON.parse(text);
    if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error("attributes: want a JSON object or NAME=VALUE lines");
    for (const [k, x] of Object.entries(v)) {
      if (x !== null && typeof x === "object") throw new Error(`attribute ${k}: want a string, a number or true/false`);
      attrs[k] = x === null ? "" : String(x);
    }
    return attrs;
  }
  for (const [i, line] of text.split("\n").entries()) {
    const l = line.trim();
    if (!l || l.startsWith("#")) continue;
    const eq = l.indexOf("=");
    if (eq <= 0) throw new Error(`attributes, line ${i + 1}: want NAME=VALUE, such as path=/login`);
    attrs[l.slice(0, eq).trim()] = l.slice(eq + 1).trim();
  }
  return attrs;
}

async function decide() {
  const req = optionsOrSay(() => {
    let attrs;
    try {
      attrs = readAttrs($("attrs").value);
    } catch (err) {
      throw new Error(err instanceof SyntaxError ? "attributes: " + err.message : err.message);
    }
    const cost = wholeNumber("cost", "cost");
    const at = wholeNumber("at", "time");
    return { attrs, cost: cost === null ? 1 : cost, at: (at || 0) + "s" };
  });
  if (!req) return;
  let res;
  try {
    res = await live.call("decide", [filesJSON(), JSON.stringify(req)]);
  } catch (err) {
    $("run-status").textContent = "decide: " + err.message;
    return;
  }
  const out = $("output");
  if (res.error) {
    out.replaceChildren(el("h2", {}, "decide"), ...problem(res));
    return;
  }
  if (res.fresh) decisions = [];
  decisions.unshift({ req, res });
  renderDecisions();
}

function renderDecisions() {
  const retry = (ns) => ns < 0 ? "never" : duration(ns);
  $("output").replaceChildren(el("h2", {}, "decide"),
    el("p", { class: "note" }, "Each decision is charged in a state the next ones see, on a virtual clock that moves only when the time field does: Reset starts over, as changed files do."),
    ...decisions.map(({ req, res }, i) => el("section", { class: "decision " + (res.allowed ? "allowed" : "denied"), "data-decider": res.decider },
      el("h3", {}, `#${decisions.length - i} at ${duration(res.at_ns)}: `,
        el("span", { class: "badge " + (res.allowed ? "pass" : "fail") }, res.allowed ? "allowed" : "denied"),
        res.decider && el("span", {}, " by ", el("code", {}, res.decider), `, retry after ${retry(res.retry_after_ns)}`),
        res.source === "no_rules" && el("span", { class: "note" }, " no rule applies")),
      el("p", { class: "request" }, `cost ${req.cost}, `, el("code", {}, JSON.stringify(req.attrs))),
      res.rules.length > 0 && el("table", { class: "rules" },
        el("thead", {}, el("tr", {}, ["rule", "algorithm", "allowed", "limit", "remaining", "retry after", "reset after", "key"].map((h) => el("th", {}, h)))),
        el("tbody", {}, res.rules.map((r) => el("tr", { class: r.allowed ? "" : "mark", "data-rule": `${r.policy}.${r.rule}` },
          el("td", {}, `${r.policy}.${r.rule}`, r.shadow ? " (shadow)" : ""), el("td", {}, r.algorithm),
          el("td", {}, r.allowed ? "yes" : "no"), el("td", {}, String(r.limit)), el("td", {}, String(r.remaining)),
          el("td", {}, retry(r.retry_after_ns)), el("td", {}, duration(r.reset_after_ns)), el("td", {}, el("code", {}, r.key)))))))));
}

// forgetDecisions starts the decisions' state over: no charge, the clock at 0.
function forgetDecisions() {
  decisions = [];
  $("at").value = "0";
  if (live && !live.dead) live.call("resetDecisions", []).catch(() => {});
}

function resetDecisions() {
  forgetDecisions();
  $("output").replaceChildren(el("h2", {}, "decide"), el("p", { class: "note" }, "Reset: no request charged yet, the clock at 0 s."));
}

// ---- the quick reference ----

// reference holds the module's reference(): the language's short references, [{name,
// short, text}], each what rlctl help NAME prints; topic is the one shown.
let reference = [];
let topic = "";

// loadReference asks the live worker for the reference, once, and enables its button.
async function loadReference() {
  try {
    const list = await live.call("reference", []);
    if (!Array.isArray(list)) throw new Error(list && list.error ? list.error : "no topics");
    reference = list;
  } catch (err) {
    $("reference-short").textContent = "The reference cannot be loaded: " + err.message;
    return;
  }
  topic = reference.length ? reference[0].name : "";
  renderReference();
  $("reference-toggle").disabled = !reference.length;
}

// renderReference shows the topics as tabs, the chosen one's text under them.
function renderReference() {
  const chosen = reference.find((t) => t.name === topic);
  $("reference-topics").replaceChildren(...reference.map((t) => el("button", {
    class: "topic", role: "tab", id: "reference-tab-" + t.name, "data-topic": t.name, title: t.short,
    "aria-selected": t.name === topic ? "true" : "false", "aria-controls": "reference-text",
    tabindex: t.name === topic ? "0" : "-1", onclick: () => chooseTopic(t.name),
  }, t.name)));
  $("reference-short").textContent = chosen ? `${chosen.short[0].toUpperCase()}${chosen.short.slice(1)}. rlctl help ${chosen.name} prints the same.` : "";
  $("reference-text").textContent = chosen ? chosen.text : "";
  $("reference-text").setAttribute("aria-labelledby", chosen ? "reference-tab-" + chosen.name : "reference-title");
  $("reference-text").scrollTop = 0;
}

function chooseTopic(name) {
  if (name === topic) return;
  topic = name;
  renderReference();
  $("reference-tab-" + name).focus();
}

// showReference opens (or closes) the reference panel; opened, it is scrolled into view
// and its chosen topic's tab has the focus; closed, the button that opens it has.
function showReference(open) {
  const panel = $("reference");
  const toggle = $("reference-toggle");
  if (panel.hidden === !open) return;
  panel.hidden = !open;
  toggle.setAttribute("aria-expanded", String(open));
  toggle.classList.toggle("open", open);
  if (open) {
    panel.scrollIntoView({ block: "nearest" });
    const tab = $("reference-tab-" + topic);
    if (tab) tab.focus();
  } else {
    toggle.focus();
  }
}

// onReferenceKey is the panel's keyboard: Escape closes it; on the topics' tabs, the
// right and left arrows, Home and End choose the next, the previous (round the ends), the
// first and the last topic.
function onReferenceKey(e) {
  if (e.key === "Escape") {
    e.preventDefault();
    showReference(false);
    return;
  }
  if (!e.target.classList.contains("topic") || !reference.length) return;
  const at = reference.findIndex((t) => t.name === topic);
  const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: reference.length - 1 }[e.key];
  if (to === undefined) return;
  e.preventDefault();
  chooseTopic(reference[(to + reference.length) % reference.length].name);
}

// ---- start ----

// compileModule fetches and compiles rlctl.wasm: streaming when the server says
// application/wasm, from the bytes otherwise.
async function compileModule() {
  const resp = await fetch("rlctl.wasm");
  if (!resp.ok) throw new Error(`rlctl.wasm: ${resp.status} ${resp.statusText}`);
  if ((resp.headers.get("Content-Type") || "").startsWith("application/wasm")) {
    return WebAssembly.compileStreaming(resp);
  }
  return WebAssembly.compile(await resp.arrayBuffer());
}

const started = { edited: false };

async function start() {
  const ta = $("text");
  ta.addEventListener("input", () => {
    started.edited = true;
    onInput();
  });
  ta.addEventListener("scroll", syncScroll);
  ta.addEventListener("keydown", onKeyDown);
  $("add-file").addEventListener("click", () => { started.edited = true; addFile(); });
  $("remove-file").addEventListener("click", () => { started.edited = true; removeFile(); });
  $("format").addEventListener("click", format);
  $("simulate").addEventListener("click", simulate);
  $("verify").addEventListener("click", verify);
  $("stop").addEventListener("click", stop);
  $("share").addEventListener("click", share);
  window.addEventListener("popstate", onPopState);
  window.addEventListener("beforeunload", (e) => {
    if (!edited()) return;
    e.preventDefault();
    e.returnValue = "";
  });
  $("decide").addEventListener("click", decide);
  $("tick").addEventListener("click", () => {
    const at = optionsOrSay(() => wholeNumber("at", "time") || 0);
    if (at !== null) $("at").value = String(at + 1);
  });
  $("reset-decisions").addEventListener("click", resetDecisions);
  $("reference-toggle").addEventListener("click", () => showReference($("reference").hidden));
  $("reference-close").addEventListener("click", () => showReference(false));
  $("reference").addEventListener("keydown", onReferenceKey);

  const fromLink = await filesFromLink();
  if (fromLink) {
    setFiles(fromLink);
    origin = linkHash;
  }
  try {
    module = await compileModule();
  } catch (err) {
    setStatus("error", "rlctl.wasm cannot be loaded: " + err.message);
    return;
  }
  timing.compiled = performance.now();
  setStatus("", "starting rlctl…");
  live = new Runner("live");
  runner = new Runner("run");
  try {
    await live.ready;
  } catch (err) {
    setStatus("error", err.message);
    return;
  }
  timing.ready = performance.now();
  if (fromLink) validateNow(); // first: a link's files need no example
  const list = await live.call("examples", []);
  timing.examples = performance.now();
  examples = Array.isArray(list) ? list : [];
  renderExamples();
  $("format").disabled = $("share").disabled = $("decide").disabled = false;
  setRunning(null);
  const named = exampleOf(location.hash);
  if (named) {
    linkHash = location.hash;
    loadExample(named, true);
  } else if (!fromLink && examples.length) {
    loadExample(examples[0], false);
  }
  loadReference(); // after the first validate: that one is waited for
}

async function format() {
  const name = state.active;
  if (!name.endsWith(".hcl")) {
    setStatus("warning", "Format rewrites native-syntax policy files (.hcl) only.");
    return;
  }
  const res = await live.call("format", [name, state.files[name]]);
  if (res.error) {
    setStatus("error", "format: " + res.error);
    if (res.diagnostics && res.diagnostics.length) {
      state.diagnostics = res.diagnostics;
      renderDiagnostics();
      renderGutter(true);
      renderMarks();
      renderTabs();
    }
    return;
  }
  if (!res.changed || state.active !== name) return;
  const ta = $("text");
  ta.focus();
  ta.select();
  // insertText keeps the change on the editor's undo stack; assigning value would not.
  if (!document.execCommand("insertText", false, res.formatted)) {
    ta.value = res.formatted;
    ta.dispatchEvent(new Event("input"));
  }
}

start();
