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
  $("marks").style.transform = `translate(${-ta.scrollLeft}px, ${-ta.scrollTop}px)`;
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
