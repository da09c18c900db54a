package main

import (
	"fmt"
	"strings"
)

// unifiedDiff returns the unified diff that turns a into b, with context lines of context
// around each change: "--- a/NAME" and "+++ b/NAME" headers, then "@@ -l,n +l,n @@" hunks,
// as diff -u writes them and patch -p1 applies them. A last line without a newline is
// followed by "\ No newline at end of file". Equal inputs give "".
func unifiedDiff(name string, a, b []byte, context int) string {
	edits := diffLines(splitLines(string(a)), splitLines(string(b)))
	// line[i] is the 0-based line of a and of b at edits[i].
	line := make([][2]int, len(edits)+1)
	for i, e := range edits {
		line[i+1] = line[i]
		if e.op != '+' {
			line[i+1][0]++
		}
		if e.op != '-' {
			line[i+1][1]++
		}
	}
	var s strings.Builder
	for i := 0; i < len(edits); i++ {
		if edits[i].op == ' ' {
			continue
		}
		// The hunk starts context lines before this change and ends context lines after
		// the last change that no more than 2*context equal lines separate from the next.
		start, end := max(i-context, 0), i
		for end < len(edits) {
			eq := end
			for eq < len(edits) && edits[eq].op == ' ' {
				eq++
			}
			if eq > end && (eq == len(edits) || eq-end > 2*context) {
				end = min(end+context, eq)
				break
			}
			end = eq
			for end < len(edits) && edits[end].op != ' ' {
				end++
			}
		}
		if s.Len() == 0 {
			fmt.Fprintf(&s, "--- a/%s\n+++ b/%s\n", name, name)
		}
		fmt.Fprintf(&s, "@@ -%s +%s @@\n", hunkRange(line[start][0], line[end][0]-line[start][0]),
			hunkRange(line[start][1], line[end][1]-line[start][1]))
		for _, e := range edits[start:end] {
			s.WriteByte(e.op)
			s.WriteString(e.line)
			if !strings.HasSuffix(e.line, "\n") {
				s.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end - 1
	}
	return s.String()
}

// hunkRange writes a hunk's start and length as diff -u does: start is 1-based, or the
// line before the hunk when it is empty, and a length of 1 is left out.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// splitLines splits s after each newline; the last line has none if s does not end in one.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// edit is one line of an edit script: kept (' '), deleted from a ('-') or inserted from b
// ('+').
type edit struct {
	op   byte
	line string
}

// diffLines returns a shortest edit script from a to b (Myers, "An O(ND) Difference
// Algorithm and Its Variations", 1986), with deletions before insertions in each change.
// It keeps, for each number of edits d, the furthest x reached on each diagonal k in
// [-d, d], and walks that trace back from (len(a), len(b)); space is O(D²).
func diffLines(a, b []string) []edit {
	n, m := len(a), len(b)
	// v[k+off] is the furthest x on diagonal k = x - y.
	off := n + m + 1
	v := make([]int, 2*off+1)
	var trace [][]int // trace[d][k+d] is v[k] after d edits
	done := false
	for d := 0; d <= n+m; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1] // down: insert b[y-1]
			} else {
				x = v[off+k-1] + 1 // right: delete a[x-1]
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				done = true
			}
		}
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
		if done {
			break
		}
	}
	var rev []edit
	x, y := n, m
	for d := len(trace) - 1; d > 0; d-- {
		prev := trace[d-1] // prev[k+d-1] is v[k] after d-1 edits
		at := func(k int) int { return prev[k+d-1] }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		mx, my := px, py+1 // after the edit, before the snake
		if pk == k-1 {
			mx, my = px+1, py
		}
		for x > mx && y > my {
			rev = append(rev, edit{' ', a[x-1]})
			x, y = x-1, y-1
		}
		if pk == k+1 {
			rev = append(rev, edit{'+', b[py]})
		} else {
			rev = append(rev, edit{'-', a[px]})
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		rev = append(rev, edit{' ', a[x-1]})
		x, y = x-1, y-1
	}
	edits := make([]edit, 0, len(rev))
	for i := len(rev) - 1; i >= 0; i-- {
		edits = append(edits, rev[i])
	}
	return normalize(edits)
}

// normalize puts the deletions of each run of changes before its insertions, the order
// diff -u prints them in.
func normalize(edits []edit) []edit {
	out := make([]edit, 0, len(edits))
	for i := 0; i < len(edits); {
		if edits[i].op == ' ' {
			out = append(out, edits[i])
			i++
			continue
		}
		j := i
		for j < len(edits) && edits[j].op != ' ' {
			j++
		}
		for _, e := range edits[i:j] {
			if e.op == '-' {
				out = append(out, e)
			}
		}
		for _, e := range edits[i:j] {
			if e.op == '+' {
				out = append(out, e)
			}
		}
		i = j
	}
	return out
}
