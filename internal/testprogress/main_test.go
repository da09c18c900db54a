package main

import (
	"strings"
	"testing"
	"time"
)

// Packages are reported as they finish, a failed one with its output, and a failed
// build with the compiler's.
func TestRun(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"a"}`,
		`{"Action":"start","Package":"b"}`,
		`{"Action":"output","Package":"b","Output":"--- FAIL: TestX\n"}`,
		`{"Action":"fail","Package":"b","Test":"TestX"}`,
		`{"Action":"fail","Package":"b","Elapsed":1.5}`,
		`{"Action":"output","Package":"a","Output":"ok noise\n"}`,
		`{"Action":"pass","Package":"a","Elapsed":2}`,
		`{"ImportPath":"c [c.test]","Action":"build-output","Output":"c/x.go:1: undefined: y\n"}`,
		`{"ImportPath":"c [c.test]","Action":"build-fail"}`,
		`not json`,
	}, "\n")
	var out strings.Builder
	clock := time.Unix(0, 0)
	failed, err := run(strings.NewReader(in), &out, func() time.Time { clock = clock.Add(time.Second); return clock })
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	want := []string{"b: testing", "--- FAIL: TestX", "FAIL\tb\t1.500s", "ok  \ta\t2.000s", "c/x.go:1: undefined: y", "not json"}
	got := out.String()
	at := 0
	for _, w := range want {
		i := strings.Index(got[at:], w)
		if i < 0 {
			t.Fatalf("%q not in order in:\n%s", w, got)
		}
		at += i
	}
	if strings.Contains(got, "ok noise") {
		t.Errorf("a passing package's output was printed:\n%s", got)
	}
}
