package main

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{name: "equal", a: "x\ny\n", b: "x\ny\n", want: ""},
		{name: "empty to one line", a: "", b: "x\n", want: "--- a/f.hcl\n+++ b/f.hcl\n@@ -0,0 +1 @@\n+x\n"},
		{name: "one line to empty", a: "x\n", b: "", want: "--- a/f.hcl\n+++ b/f.hcl\n@@ -1 +0,0 @@\n-x\n"},
		{
			name: "change in the middle keeps three lines of context",
			a:    "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			b:    "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			want: "--- a/f.hcl\n+++ b/f.hcl\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
		},
		{
			name: "changes six equal lines apart share a hunk",
			a:    "a\n1\n2\n3\n4\n5\n6\nb\n",
			b:    "A\n1\n2\n3\n4\n5\n6\nB\n",
			want: "--- a/f.hcl\n+++ b/f.hcl\n@@ -1,8 +1,8 @@\n-a\n+A\n 1\n 2\n 3\n 4\n 5\n 6\n-b\n+B\n",
		},
		{
			name: "changes seven equal lines apart get two hunks",
			a:    "a\n1\n2\n3\n4\n5\n6\n7\nb\n",
			b:    "A\n1\n2\n3\n4\n5\n6\n7\nB\n",
			want: "--- a/f.hcl\n+++ b/f.hcl\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -6,4 +6,4 @@\n 5\n 6\n 7\n-b\n+B\n",
		},
		{
			name: "insertion",
			a:    "1\n2\n",
			b:    "1\nx\n2\n",
			want: "--- a/f.hcl\n+++ b/f.hcl\n@@ -1,2 +1,3 @@\n 1\n+x\n 2\n",
		},
		{
			name: "a last line without a newline",
			a:    "1\n2",
			b:    "1\n2\n",
			want: "--- a/f.hcl\n+++ b/f.hcl\n@@ -1,2 +1,2 @@\n 1\n-2\n\\ No newline at end of file\n+2\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unifiedDiff("f.hcl", []byte(tc.a), []byte(tc.b), 3); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestUnifiedDiffApplies checks, on random pairs of files, that the diff's hunks turn a
// into b and that the edit script is a shortest one (as long as the LCS says).
func TestUnifiedDiffApplies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	file := func() string {
		var s strings.Builder
		for range r.IntN(30) {
			fmt.Fprintf(&s, "%c\n", 'a'+r.IntN(4))
		}
		if r.IntN(4) == 0 {
			s.WriteString("z")
		}
		return s.String()
	}
	for i := range 2000 {
		a, b := file(), file()
		d := unifiedDiff("f", []byte(a), []byte(b), 1+i%4)
		got, err := applyDiff(a, d)
		if err != nil {
			t.Fatalf("%q → %q: %v in\n%s", a, b, err, d)
		}
		if got != b {
			t.Fatalf("%q → %q: the diff gives %q:\n%s", a, b, got, d)
		}
		al, bl := splitLines(a), splitLines(b)
		changed := 0
		for _, e := range diffLines(al, bl) {
			if e.op != ' ' {
				changed++
			}
		}
		if want := len(al) + len(bl) - 2*lcs(al, bl); changed != want {
			t.Fatalf("%q → %q: %d lines changed, a shortest script changes %d", a, b, changed, want)
		}
	}
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)

// applyDiff applies a unified diff strictly: every context and deleted line must be in a
// at the place its hunk says, and the hunk's counts must match its lines.
func applyDiff(a, d string) (string, error) {
	if d == "" {
		return a, nil
	}
	al := splitLines(a)
	lines := splitLines(d)
	if len(lines) < 2 || lines[0] != "--- a/f\n" || lines[1] != "+++ b/f\n" {
		return "", fmt.Errorf("bad header")
	}
	var out []string
	next := 0 // the next line of a to copy
	for i := 2; i < len(lines); {
		m := hunkHeader.FindStringSubmatch(strings.TrimSuffix(lines[i], "\n"))
		if m == nil {
			return "", fmt.Errorf("line %d: no hunk header: %q", i+1, lines[i])
		}
		num := func(s string, def int) int {
			if s == "" {
				return def
			}
			n, _ := strconv.Atoi(s)
			return n
		}
		aStart, aN, bN := num(m[1], 0), num(m[2], 1), num(m[4], 1)
		if aN > 0 {
			aStart-- // 0-based; an empty range names the line before it
		}
		if aStart < next || aStart > len(al) {
			return "", fmt.Errorf("hunk at %d out of order", aStart)
		}
		out = append(out, al[next:aStart]...)
		next = aStart
		i++
		for ; i < len(lines) && !strings.HasPrefix(lines[i], "@@"); i++ {
			l := lines[i]
			if i+1 < len(lines) && lines[i+1] == "\\ No newline at end of file\n" {
				l = strings.TrimSuffix(l, "\n")
				lines = append(lines[:i+1], lines[i+2:]...)
			}
			op, text := l[0], l[1:]
			if op != '+' {
				if next >= len(al) || al[next] != text {
					return "", fmt.Errorf("line %d: %q is not line %d of a", i+1, text, next+1)
				}
				next++
				aN--
			}
			if op != '-' {
				out = append(out, text)
				bN--
			}
		}
		if aN != 0 || bN != 0 {
			return "", fmt.Errorf("hunk counts off by %d, %d", aN, bN)
		}
	}
	return strings.Join(append(out, al[next:]...), ""), nil
}

func lcs(a, b []string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(cur[j], prev[j+1])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
