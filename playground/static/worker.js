// worker.js runs rlctl's WebAssembly module (rlctl.wasm, started by Go's wasm_exec.js)
// off the page's thread, so that a long verify never freezes the page.
//
// The page posts {module}, a compiled WebAssembly.Module, first; then calls, each
// {id, method, args}: a method of globalThis.rlctlPlayground (validate, format, simulate,
// verify, examples, decide, resetDecisions, newFile, reference: playground/wasm/main.go
// lists them) and its arguments. The worker answers
//   {ready: true}              once the module has registered rlctlPlayground
//   {failed: message}          when the module cannot start, or has exited
//   {id, progress: [d, t]}     verify's progress: d of t checks done
//   {id, result}               the method's JSON text, {"error": "…"} when it failed
// Calls run one after another, in the order posted; those that arrive before the module
// is ready wait. To stop a call, the page terminates the worker.
"use strict";

importScripts("wasm_exec.js");

let api = null;
const waiting = [];

self.onmessage = (e) => {
  const m = e.data;
  if (m.module) {
    start(m.module);
  } else if (api) {
    call(m);
  } else {
    waiting.push(m);
  }
};

function start(module) {
  const go = new Go();
  // Go calls this from inside its main; the calls wait for it to return.
  globalThis.onRlctlPlaygroundReady = () => setTimeout(() => {
    api = globalThis.rlctlPlayground;
    postMessage({ ready: true });
    while (waiting.length) call(waiting.shift());
  }, 0);
  WebAssembly.instantiate(module, go.importObject)
    .then((instance) => go.run(instance))
    .then(() => postMessage({ failed: "the rlctl module exited" }))
    .catch((err) => postMessage({ failed: "the rlctl module cannot start: " + err }));
}

function call(m) {
  let result;
  try {
    const args = m.args.slice();
    if (m.method === "verify") {
      args.push((done, total) => postMessage({ id: m.id, progress: [done, total] }));
    }
    result = api[m.method](...args);
  } catch (err) {
    result = JSON.stringify({ error: String(err) });
  }
  postMessage({ id: m.id, result });
}
