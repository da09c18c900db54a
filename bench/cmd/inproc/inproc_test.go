package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestLimits checks every contender but the bare handler refuses an address's 4th request
// of a limit of 3, and that the rlctl ones are there on both backends: the table never
// compares a middleware that does not limit.
func TestLimits(t *testing.T) {
	want := map[string]bool{
		"rlctl luahost, gcra": false, "rlctl luahost, fixed_window": false,
		"rlctl native, gcra": false, "rlctl native, fixed_window": false,
		httprateName: false, "x/time/rate, per-IP map under a mutex": false,
	}
	for _, c := range contenders() {
		if _, ok := want[c.name]; ok {
			want[c.name] = true
		}
		t.Run(c.name, func(t *testing.T) {
			if err := sanity(c); err != nil {
				t.Fatal(err)
			}
		})
	}
	for name, found := range want {
		if !found {
			t.Errorf("no contender %q", name)
		}
	}
}

// TestSanityCatchesNoLimit checks the sanity check fails a middleware that limits nothing.
func TestSanityCatchesNoLimit(t *testing.T) {
	c := contender{name: "none", build: func(next http.Handler, _ bool) (http.Handler, error) { return next, nil }}
	if err := sanity(c); err == nil {
		t.Fatal("sanity passed a handler that limits nothing")
	}
}

// TestRun measures a tiny run of every contender, and renders its report.
func TestRun(t *testing.T) {
	l := load{n: 300, c: 2, allocN: 50, addrs: addresses(16)}
	rep, err := measure(contenders(), 2, l, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range contenders() {
		cs := rep.res[c.name]
		if len(cs) != 2 {
			t.Fatalf("%s: %d cells, want 2", c.name, len(cs))
		}
		for _, cl := range cs {
			if cl.n != l.n || cl.elapsed <= 0 || cl.allocs < 0 {
				t.Errorf("%s: %+v", c.name, cl)
			}
		}
	}
	var b strings.Builder
	rep.env = "test"
	rep.write(&b)
	for _, want := range []string{"| bare handler |", "| rlctl native, gcra |", "| rlctl luahost, fixed_window |",
		"| " + httprateName + " |", "| gcra: native ÷ luahost |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report has no row %q:\n%s", want, b.String())
		}
	}
}

// TestCellRefused checks a cell fails when its contender refuses a request.
func TestCellRefused(t *testing.T) {
	deny := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTooManyRequests) })
	c := contender{name: "deny", build: func(http.Handler, bool) (http.Handler, error) { return deny, nil }}
	if _, err := runCell(c, load{n: 10, c: 2, allocN: 1, addrs: addresses(4)}); err == nil {
		t.Fatal("a cell of refused requests passed")
	}
}

func TestAddresses(t *testing.T) {
	as := addresses(1024)
	seen := map[string]bool{}
	for _, a := range as {
		seen[a] = true
	}
	if len(seen) != 1024 {
		t.Errorf("%d distinct addresses of 1024", len(seen))
	}
	if got := as[1023]; got != "10.0.3.255:41023" {
		t.Errorf("addresses[1023] = %q", got)
	}
}
