package playground

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestWasmIsCurrent builds the WebAssembly module as make playground does, into a
// temporary directory, and requires the committed static/rlctl.wasm.gz and
// static/wasm_exec.js to be the same bytes.
func TestWasmIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the wasm module: a minute or two from a cold build cache")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	dir := t.TempDir()
	start := time.Now()
	cmd := exec.Command(goTool, "run", "./internal/mkwasm", "-o", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/mkwasm: %v\n%s", err, out)
	}
	t.Logf("built in %s", time.Since(start).Round(time.Second))
	for _, name := range []string{"rlctl.wasm.gz", "wasm_exec.js"} {
		built, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("static", name))
		switch {
		case err != nil:
			t.Errorf("%v: run make playground", err)
		case !bytes.Equal(built, committed):
			t.Errorf("playground/static/%s (%d bytes) is not what %s builds from this tree (%d bytes): run make playground",
				name, len(committed), runtime.Version(), len(built))
		}
	}
}

// nodeScript loads the committed module in Node.js as a page would (wasm_exec.js with
// no file system, the gzip inflated), waits for rlctlPlaygroundReady, calls every
// method, and prints their results as one JSON object.
const nodeScript = `
const fs = require("fs"), zlib = require("zlib");
const [staticDir, filesJSON] = process.argv.slice(2);
require(staticDir + "/wasm_exec.js");
const go = new Go();
const out = {};
globalThis.onRlctlPlaygroundReady = () => setTimeout(() => {
	const p = globalThis.rlctlPlayground;
	out.ready = globalThis.rlctlPlaygroundReady;
	out.examples = JSON.parse(p.examples());
	out.reference = JSON.parse(p.reference());
	out.validate = JSON.parse(p.validate(filesJSON));
	out.validateObject = JSON.parse(p.validate(JSON.parse(filesJSON)));
	out.format = JSON.parse(p.format("a.hcl", "policy  \"a\" {\n}\n"));
	out.simulate = JSON.parse(p.simulate(filesJSON, JSON.stringify({seed: 3})));
	out.progress = [];
	out.verify = JSON.parse(p.verify(filesJSON, '{"budget": 30, "duration": "1m"}', (done, total) => out.progress.push([done, total])));
	const req = {attrs: {path: "/v1/export", user: "u"}, cost: 2, at: "1s"};
	out.decide = [JSON.parse(p.decide(filesJSON, req)), JSON.parse(p.decide(filesJSON, JSON.stringify(req)))];
	out.resetDecisions = JSON.parse(p.resetDecisions());
	out.decide.push(JSON.parse(p.decide(filesJSON, req)));
	out.newFile = JSON.parse(p.newFile("a.hcl"));
	out.badFiles = JSON.parse(p.validate(42));
	out.badOpts = JSON.parse(p.verify(filesJSON, "{", undefined));
	// Exit once the output is written: to a pipe, write is asynchronous, and an exit
	// right after it cuts off what did not fit the pipe's buffer.
	process.stdout.write(JSON.stringify(out), () => process.exit(0));
}, 0);
WebAssembly.instantiate(zlib.gunzipSync(fs.readFileSync(staticDir + "/rlctl.wasm.gz")), go.importObject)
	.then((r) => go.run(r.instance))
	.catch((err) => { console.error(err); process.exit(1); });
`

// TestWasmInNode runs the committed module in Node.js and requires each method to
// return what the package's function returns for the same arguments.
func TestWasmInNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the wasm module in node")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		// make test installs node (its node-deps stage) and sets the switch.
		if os.Getenv("RLCTL_REQUIRE_NODE") == "1" {
			t.Fatal("node not found on PATH and RLCTL_REQUIRE_NODE=1: install it (apt-get install -y nodejs) or run make test")
		}
		t.Skip("no node (apt-get install -y nodejs; RLCTL_REQUIRE_NODE=1 makes this a failure)")
	}
	static, err := filepath.Abs("static")
	if err != nil {
		t.Fatal(err)
	}
	files := exampleFiles(t, "simple_gcra")
	filesJSON, _ := json.Marshal(files)
	script := filepath.Join(t.TempDir(), "smoke.js")
	if err := os.WriteFile(script, []byte(nodeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(node, script, static, string(filesJSON))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.Bytes())
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	seed, two := int64(3), int64(2)
	var progress [][2]int
	var session Session
	req := DecideRequest{Attrs: map[string]string{"path": "/v1/export", "user": "u"}, Cost: &two, At: "1s"}
	decided := []DecideResult{session.Decide(files, req), session.Decide(files, req)}
	session.Reset()
	decided = append(decided, session.Decide(files, req))
	for method, want := range map[string]any{
		"ready":          true,
		"examples":       Examples(),
		"reference":      Reference(),
		"validate":       Validate(files),
		"validateObject": Validate(files),
		"format":         Format("a.hcl", "policy  \"a\" {\n}\n"),
		"simulate":       Simulate(files, SimulateOptions{Seed: &seed}),
		"verify":         Verify(files, VerifyOptions{Budget: 30, Duration: "1m"}, func(done, total int) { progress = append(progress, [2]int{done, total}) }),
		"decide":         decided,
		"resetDecisions": struct{}{},
		"newFile":        NewFile("a.hcl"),
		"badFiles":       map[string]string{"error": "files is a number; want a JSON string or an object"},
		"badOpts":        map[string]string{"error": "opts: unexpected end of JSON input"},
	} {
		w, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, got[method], w) {
			t.Errorf("%s: the wasm module returns\n%.2000s\nthe package\n%.2000s", method, got[method], w)
		}
	}
	var calls [][2]int
	if err := json.Unmarshal(got["progress"], &calls); err != nil || len(calls) == 0 || len(calls) > len(progress) || calls[len(calls)-1] != progress[len(progress)-1] {
		t.Errorf("onProgress was called with %s; the package reports %v", got["progress"], progress)
	}
}

// exampleFiles returns the files of the example called name.
func exampleFiles(t *testing.T, name string) map[string]string {
	for _, ex := range Examples() {
		if ex.Name == name {
			return ex.Files
		}
	}
	t.Fatalf("no example %s", name)
	return nil
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}
