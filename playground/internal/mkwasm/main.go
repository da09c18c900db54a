// Command mkwasm builds the browser playground's files into playground/static:
// rlctl.wasm.gz, playground/wasm compiled to WebAssembly and gzipped, and wasm_exec.js,
// the loader of the Go toolchain that built it (the two must match).
//
//	go run ./playground/internal/mkwasm [-o DIR]
//
// make playground runs it. The build is reproducible: the same source and Go toolchain
// give the same bytes (-trimpath, no build ID, no VCS stamp; gzip at BestCompression
// with no name and no time), so the generated files are committed and
// TestWasmIsCurrent in package playground checks that they are current.
package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	out := flag.String("o", "", "the directory to write to (default: playground/static in the module)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./playground/internal/mkwasm [-o DIR]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*out); err != nil {
		fmt.Fprintf(os.Stderr, "mkwasm: %v\n", err)
		os.Exit(1)
	}
}

func run(out string) error {
	root, err := goEnv("GOMOD")
	if err != nil {
		return err
	}
	if root == "" || root == os.DevNull {
		return errors.New("not in a Go module")
	}
	root = filepath.Dir(root)
	if out == "" {
		out = filepath.Join(root, "playground", "static")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "mkwasm")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	start := time.Now()
	wasm := filepath.Join(tmp, "rlctl.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", wasm, "./playground/wasm")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./playground/wasm: %v", err)
	}
	built := time.Since(start)
	raw, err := os.ReadFile(wasm)
	if err != nil {
		return err
	}
	gz, err := gzipped(raw)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "rlctl.wasm.gz"), gz, 0o644); err != nil {
		return err
	}

	goroot, err := goEnv("GOROOT")
	if err != nil {
		return err
	}
	var js []byte
	for _, dir := range []string{"lib/wasm", "misc/wasm"} { // Go 1.24 moved it to lib/wasm
		if js, err = os.ReadFile(filepath.Join(goroot, dir, "wasm_exec.js")); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("no wasm_exec.js in %s/lib/wasm or misc/wasm: %v", goroot, err)
	}
	if err := os.WriteFile(filepath.Join(out, "wasm_exec.js"), js, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mkwasm: %s: %d bytes gzipped (%d bytes of wasm, built in %.1fs); wasm_exec.js: %d bytes\n",
		filepath.Join(out, "rlctl.wasm.gz"), len(gz), len(raw), built.Seconds(), len(js))
	return nil
}

// gzipped compresses b the same way every time: BestCompression, no name, no time.
func gzipped(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	// The zero Header: no Name, ModTime the zero time (written as 0), OS unknown.
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// goEnv returns go env name.
func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
