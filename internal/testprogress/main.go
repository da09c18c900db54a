// Command testprogress turns the event stream of `go test -json` into what `go test`
// prints, as each package finishes rather than in package order: a line when a package's
// tests start, go test's own "ok" or "FAIL" line when it ends (with the time since the
// run began after it), and the whole output of a
// package that failed (or did not build). make test pipes its long stages through it so
// that a run says what it is doing. It exits 1 when any package failed.
//
//	go test -json ./... | go run ./internal/testprogress
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// event is one line of test2json's stream (see `go doc test2json`).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	Elapsed    float64
	ImportPath string
}

func main() {
	failed, err := run(os.Stdin, os.Stdout, time.Now)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// run copies the stream in to out as progress lines and reports whether a package failed.
func run(in io.Reader, out io.Writer, now func() time.Time) (bool, error) {
	start := now()
	output := map[string]*strings.Builder{} // per package (or import path, for builds)
	buf := func(key string) *strings.Builder {
		if output[key] == nil {
			output[key] = &strings.Builder{}
		}
		return output[key]
	}
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || (e.Action == "" && e.ImportPath == "") {
			fmt.Fprintf(out, "%s\n", line) // not an event: pass it on
			continue
		}
		at := now().Sub(start).Round(time.Second)
		switch e.Action {
		case "build-output":
			buf(e.ImportPath).WriteString(e.Output)
		case "build-fail":
			failed = true
			fmt.Fprint(out, output[e.ImportPath])
		case "start":
			fmt.Fprintf(out, "[%s] %s: testing\n", at, e.Package)
		case "output":
			buf(e.Package).WriteString(e.Output)
		case "pass", "skip":
			if e.Test == "" {
				fmt.Fprintf(out, "ok  \t%s\t%.3fs\t[%s]\n", e.Package, e.Elapsed, at)
			}
		case "fail":
			if e.Test == "" {
				failed = true
				fmt.Fprint(out, output[e.Package])
				fmt.Fprintf(out, "FAIL\t%s\t%.3fs\t[%s]\n", e.Package, e.Elapsed, at)
			}
		}
	}
	return failed, sc.Err()
}
