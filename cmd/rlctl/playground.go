package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rlctl/rlctl/playground"
)

var cmdPlayground = &command{
	name:  "playground",
	args:  "[-http ADDR] [-export DIR]",
	short: "serve the browser playground: edit, validate, simulate and verify policies in a page",
	long: `Playground serves a web page that runs rlctl in the browser: an editor for a policy and
the Lua of its plugins (a tab per file), their diagnostics as you type, rlctl simulate's
reports with their plots, rlctl verify's findings with their counterexamples, the example
policies, and a link that carries every file (the address's #f= fragment). rlctl runs
as WebAssembly in the page's workers: nothing is sent to the server, which only serves
the files embedded in this binary. It prints the page's URL and serves until SIGINT or
SIGTERM.

With -export it serves nothing: it writes the site into DIR, to host on any static file
server: index.html, app.js, worker.js, style.css, wasm_exec.js, rlctl.wasm, and
rlctl.wasm.gz for a server that sends a precompressed file when there is one (nginx
gzip_static, Caddy's precompressed): the module is a quarter of the size gzipped.

Flags:
  -http ADDR   listen address (default 127.0.0.1:8090: this machine only; :8090 for
               every interface)
  -export DIR  write the static site into DIR instead of serving it

Exit status: 0 stopped by a signal, or the site written; 1 a listener that cannot
start or a directory that cannot be written; 2 usage error.
`,
	run: runPlayground,
}

// playgroundReady, when set (by a test), is called with the page's URL once serving.
var playgroundReady func(url string)

// playgroundStop, when set (by a test), stops the server as SIGTERM does when it is closed.
var playgroundStop chan struct{}

func runPlayground(e *env, args []string) error {
	fs := flags("playground")
	addr := fs.String("http", "127.0.0.1:8090", "")
	export := fs.String("export", "", "")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(e.stderr, "rlctl: error: playground takes no files: the page has its own editor")
		return errUsage
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["export"] {
		if given["http"] {
			fmt.Fprintln(e.stderr, "rlctl: error: -export writes the site and serves nothing: leave -http out")
			return errUsage
		}
		if *export == "" {
			fmt.Fprintln(e.stderr, "rlctl: error: -export needs a directory")
			return errUsage
		}
		names, err := playground.Export(*export)
		if err != nil {
			fmt.Fprintf(e.stderr, "rlctl: error: -export: %v\n", err)
			return errFailed
		}
		fmt.Fprintf(e.stdout, "rlctl playground: wrote %d files to %s:", len(names), *export)
		for _, n := range names {
			fmt.Fprintf(e.stdout, " %s", n)
		}
		fmt.Fprintf(e.stdout, "\nrlctl playground: serve the directory as it is; a server that sends precompressed files can send rlctl.wasm.gz for rlctl.wasm (with Content-Encoding: gzip)\n")
		return nil
	}

	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: -http: %v\n", err)
		return errFailed
	}
	url := pageURL(l.Addr().(*net.TCPAddr))
	srv := &http.Server{Handler: playground.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(l) }()
	fmt.Fprintf(e.stdout, "rlctl playground: serving %s\n", url)
	if playgroundReady != nil {
		playgroundReady(url)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sig)
	select {
	case <-sig:
	case <-playgroundStop:
	case err := <-errs:
		fmt.Fprintf(e.stderr, "rlctl: error: -http: %v\n", err)
		return errFailed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(e.stderr, "rlctl: error: shutting down: %v\n", err)
	}
	return nil
}

// pageURL is the URL of the page on a listener at a: an address of every interface is
// reached at localhost.
func pageURL(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(a.Port)) + "/"
}
