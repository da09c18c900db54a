package algorithms

import (
	"fmt"
	"strings"
)

// unrolledStacks is the largest stack the script decides without tables (see
// writeStacks): the engine's stacks are mostly of two to four rules.
const unrolledStacks = 4

// writeStacks writes stack2 .. stack<unrolledStacks>: stack<n>(KEYS, ARGV, now, server_now,
// ki, a) decides a check of n compiled rules whose keys are KEYS[ki + 1] .. KEYS[ki + n] and
// whose ARGV are ARGV[a + 1] .. ARGV[a + 6 + 2n] (its caller checks that count), all their
// records complete (see dispatch.lua), as the
// dispatcher's general path does (check every rule, then charge all or none, reporting the
// rules that would have allowed as a peek when one denies), with every rule's values in
// locals instead of the general path's tables. It returns nil, having touched nothing, for
// any call it does not take (a record not complete, a bad cost, repeated keys): the
// general path then parses the call and reports what is wrong.
//
// Complete records are built-ins', whose check, when it allows a charge, returns after its
// write the remaining and reset_after that a peek (check with cost 0) would return: a
// denied stack reports those, where the general path checks the rule again. A rule's
// commit gets check's sixth value and its ninth to eleventh, as the dispatcher calls every
// commit (a fast rule's pending write: see fast.go). A rule whose record has a try
// (fast.go's gcra and fixed_window) is tried instead of checked while no rule before it
// has denied: a try that allows may have charged already (its twelfth value set), and is
// then undone when a later rule denies the call (or when a later try takes no such key,
// and the stack returns nil), so that the call still charges all its rules or none.
//
// It then writes the table stacks, whose n-th entry is stack<n> (false for n = 1), and
// COUNTS, whose n-th entry is n as a call sends it (ARGV[6]), for n from 1 to
// unrolledStacks: the rule counts of the calls the dispatcher decides without parsing
// (its quick).
func writeStacks(b *strings.Builder) {
	names, counts := []string{"false"}, []string{"'1'"}
	for n := 2; n <= unrolledStacks; n++ {
		writeStack(b, n)
		names = append(names, fmt.Sprintf("stack%d", n))
		counts = append(counts, fmt.Sprintf("'%d'", n))
	}
	fmt.Fprintf(b, "local stacks = {%s}\nlocal COUNTS = {%s}\n\n", strings.Join(names, ", "), strings.Join(counts, ", "))
}

func writeStack(b *strings.Builder, n int) {
	each := func(format string, sep string) string {
		parts := make([]string, n)
		for r := 1; r <= n; r++ {
			parts[r-1] = strings.ReplaceAll(format, "#", fmt.Sprint(r))
		}
		return strings.Join(parts, sep)
	}
	fmt.Fprintf(b, "local function stack%d(KEYS, ARGV, now, server_now, ki, a)\n", n)
	for r := 1; r <= n; r++ {
		a := 5 + 2*r
		// cost_arg, with a request's usual "1" told in line.
		fmt.Fprintf(b, "local c%[1]d, n%[1]d = ready[ARGV[a + %[2]d]], ARGV[a + %[3]d]\nif n%[1]d == '1' then\nn%[1]d = 1\nelse\nn%[1]d = cost_arg(n%[1]d)\nend\n", r, a, a+1)
		fmt.Fprintf(b, "if not (c%[1]d and n%[1]d) then\nreturn\nend\n", r)
	}
	fmt.Fprintf(b, "local %s = %s\n", each("k#", ", "), each("KEYS[ki + #]", ", "))
	var same []string
	for i := 1; i <= n; i++ {
		for j := i + 1; j <= n; j++ {
			same = append(same, fmt.Sprintf("k%d == k%d", i, j))
		}
	}
	fmt.Fprintf(b, "if %s then\nreturn\nend\n", strings.Join(same, " or "))
	// Each rule is checked in turn, with its try while no rule has denied (see fast.go: a
	// try that allows has charged, t<r> set); the first rule that denies, shadows aside,
	// decides.
	b.WriteString("local allowed, decider = 1, 0\n")
	for r := 1; r <= n; r++ {
		fmt.Fprintf(b, "local f%[1]d = c%[1]d.try\nif not f%[1]d or allowed == 0 then\nf%[1]d = c%[1]d[9]\nend\n", r)
		fmt.Fprintf(b, "local ok%[1]d, re%[1]d, ra%[1]d, rs%[1]d, li%[1]d, w%[1]d, pr%[1]d, ps%[1]d, x%[1]d, y%[1]d, z%[1]d, t%[1]d = f%[1]d(k%[1]d, now, n%[1]d, c%[1]d[3])\n", r)
		// A try that takes no such key: what was tried is undone, and the general path
		// decides the call.
		fmt.Fprintf(b, "if ok%d == nil then\n", r)
		for q := 1; q < r; q++ {
			fmt.Fprintf(b, "if t%[1]d then\nc%[1]d.undo(k%[1]d, w%[1]d, n%[1]d, t%[1]d)\nend\n", q)
		}
		b.WriteString("return\nend\n")
		fmt.Fprintf(b, "if allowed == 1 and ok%[1]d == 0 and not c%[1]d[2] then\nallowed, decider = 0, %[1]d\nend\n", r)
	}
	b.WriteString("if allowed == 1 then\n")
	for r := 1; r <= n; r++ {
		fmt.Fprintf(b, "if w%[1]d and n%[1]d > 0 and not t%[1]d then\nc%[1]d[10](k%[1]d, w%[1]d, x%[1]d, y%[1]d, z%[1]d)\nend\n", r)
	}
	b.WriteString("else\n")
	for r := 1; r <= n; r++ {
		fmt.Fprintf(b, "if ok%[1]d == 1 and n%[1]d > 0 then\nre%[1]d, rs%[1]d = pr%[1]d, ps%[1]d\nend\n", r)
		fmt.Fprintf(b, "if t%[1]d then\nc%[1]d.undo(k%[1]d, w%[1]d, n%[1]d, t%[1]d)\nend\n", r)
	}
	fmt.Fprintf(b, "end\nreturn {allowed, decider, now, server_now, %s}\nend\n\n", each("ok#, re#, ra#, rs#, li#", ", "))
}
