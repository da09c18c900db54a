//go:build js && wasm

// Command wasm is the playground's bridge to JavaScript. Built with GOOS=js GOARCH=wasm
// (go run ./playground/internal/mkwasm writes playground/static/rlctl.wasm.gz) and
// started with Go's wasm_exec.js, it sets globalThis.rlctlPlayground to an object with
// the methods
//
//	validate(files)                  → Result
//	format(name, text)               → FormatResult
//	simulate(files, opts)            → SimulateResult; opts {"scenario": "", "seed": N}
//	verify(files, opts, onProgress)  → VerifyResult; opts {"seed": N, "budget": N, "duration": "1m"}
//	examples()                       → [Example]
//	decide(files, request)           → DecideResult; request {"attrs": {…}, "cost": N, "at": "1s"}
//	resetDecisions()                 → {}
//	newFile(name)                    → the text a new file opens with, as a JSON string
//	reference()                      → [dsl.Topic]: the language's short references
//
// each returning the JSON text of the playground package's result, with its field names
// (files is a JSON object from file name to content, as a string or as the object
// itself; opts, the same, may be left out). A mistake in the arguments, or a panic, is
// returned as {"error": "…"}. Then it sets globalThis.rlctlPlaygroundReady = true and
// calls globalThis.onRlctlPlaygroundReady() if there is one.
//
// Each call runs to its end before it returns, and JavaScript waits: run the module in a
// Web Worker to keep a page responsive. verify calls onProgress(done, total), when given,
// as its checks finish, at most 20 times a second and last with done == total; from a
// worker, onProgress can postMessage to the page.
//
// decide runs on one playground.Session, which keeps what the decisions charged and the
// virtual clock from one call to the next, until the files change or resetDecisions.
package main

import (
	"encoding/json"
	"fmt"
	"syscall/js"
	"time"

	"github.com/rlctl/rlctl/playground"
)

// progressEvery is the least time between two calls of verify's onProgress but the last.
const progressEvery = 50 * time.Millisecond

func main() {
	api := js.Global().Get("Object").New()
	api.Set("validate", method(func(args []js.Value) (any, error) {
		files, err := filesArg(args)
		if err != nil {
			return nil, err
		}
		return playground.Validate(files), nil
	}))
	api.Set("format", method(func(args []js.Value) (any, error) {
		name, err := str(args, 0, "name")
		if err != nil {
			return nil, err
		}
		text, err := str(args, 1, "text")
		if err != nil {
			return nil, err
		}
		return playground.Format(name, text), nil
	}))
	api.Set("simulate", method(func(args []js.Value) (any, error) {
		files, err := filesArg(args)
		if err != nil {
			return nil, err
		}
		var opts playground.SimulateOptions
		if err := decode(args, 1, "opts", &opts); err != nil {
			return nil, err
		}
		return playground.Simulate(files, opts), nil
	}))
	api.Set("verify", method(func(args []js.Value) (any, error) {
		files, err := filesArg(args)
		if err != nil {
			return nil, err
		}
		var opts playground.VerifyOptions
		if err := decode(args, 1, "opts", &opts); err != nil {
			return nil, err
		}
		var progress func(done, total int)
		if len(args) > 2 && args[2].Type() == js.TypeFunction {
			f := args[2]
			var last time.Time
			progress = func(done, total int) {
				if now := time.Now(); done == total || now.Sub(last) >= progressEvery {
					last = now
					f.Invoke(done, total)
				}
			}
		} else if len(args) > 2 && !args[2].IsUndefined() && !args[2].IsNull() {
			return nil, fmt.Errorf("onProgress is a %s, not a function", args[2].Type())
		}
		return playground.Verify(files, opts, progress), nil
	}))
	api.Set("examples", method(func([]js.Value) (any, error) {
		return playground.Examples(), nil
	}))
	api.Set("reference", method(func([]js.Value) (any, error) {
		return playground.Reference(), nil
	}))
	var session playground.Session
	api.Set("decide", method(func(args []js.Value) (any, error) {
		files, err := filesArg(args)
		if err != nil {
			return nil, err
		}
		var req playground.DecideRequest
		if err := decode(args, 1, "request", &req); err != nil {
			return nil, err
		}
		return session.Decide(files, req), nil
	}))
	api.Set("resetDecisions", method(func([]js.Value) (any, error) {
		session.Reset()
		return struct{}{}, nil
	}))
	api.Set("newFile", method(func(args []js.Value) (any, error) {
		name, err := str(args, 0, "name")
		if err != nil {
			return nil, err
		}
		return playground.NewFile(name), nil
	}))
	js.Global().Set("rlctlPlayground", api)
	js.Global().Set("rlctlPlaygroundReady", true)
	if f := js.Global().Get("onRlctlPlaygroundReady"); f.Type() == js.TypeFunction {
		f.Invoke()
	}
	select {}
}

// method makes f a JavaScript function that returns the JSON of f's result, or
// {"error": "…"} when f fails or panics.
func method(f func(args []js.Value) (any, error)) js.Func {
	return js.FuncOf(func(_ js.Value, args []js.Value) (ret any) {
		defer func() {
			if p := recover(); p != nil {
				ret = errorJSON(fmt.Sprintf("panic: %v", p))
			}
		}()
		v, err := f(args)
		if err != nil {
			return errorJSON(err.Error())
		}
		b, err := json.Marshal(v)
		if err != nil {
			return errorJSON(err.Error())
		}
		return string(b)
	})
}

func errorJSON(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}

// decode decodes args[i], the argument called name, into v: a JSON string, or an object
// JSON.stringify turns into one. A missing, undefined or null argument leaves v as it is.
func decode(args []js.Value, i int, name string, v any) error {
	if i >= len(args) || args[i].IsUndefined() || args[i].IsNull() {
		return nil
	}
	a := args[i]
	text := ""
	switch a.Type() {
	case js.TypeString:
		text = a.String()
	case js.TypeObject:
		text = js.Global().Get("JSON").Call("stringify", a).String()
	default:
		return fmt.Errorf("%s is a %s; want a JSON string or an object", name, a.Type())
	}
	if err := json.Unmarshal([]byte(text), v); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return nil
}

// filesArg returns args[0], the files: a JSON object from file name to content.
func filesArg(args []js.Value) (map[string]string, error) {
	var files map[string]string
	if err := decode(args, 0, "files", &files); err != nil {
		return nil, err
	}
	if files == nil {
		return nil, fmt.Errorf("files: want a JSON object from file name to content")
	}
	return files, nil
}

// str returns args[i], the string argument called name.
func str(args []js.Value, i int, name string) (string, error) {
	if i >= len(args) || args[i].Type() != js.TypeString {
		return "", fmt.Errorf("%s: want a string", name)
	}
	return args[i].String(), nil
}
