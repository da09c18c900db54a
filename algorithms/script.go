package algorithms

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rlctl/rlctl/lua"
)

// Script is an assembled engine script: the prelude, a set of algorithms, the rules
// compiled into it and the dispatcher. It has two forms of one text: Source, run with
// EVAL / EVALSHA, and Library, loaded with FUNCTION LOAD and run with FCALL Function. Both
// are Body with a line that runs its main function: whichever a server takes, it runs the
// same code.
type Script struct {
	Source     string       // the Lua program sent to SCRIPT LOAD: Body, then a call of its main
	SHA1       string       // lowercase hex SHA1 of Source, the EVALSHA handle
	Algorithms []*Algorithm // in script order
	// Rules are the compiled rules, in order: Rules[i].Index is i+1.
	Rules []*Compiled

	// Body is the code both forms share: every definition, and main(KEYS, ARGV).
	Body string
	// Library is the text for FUNCTION LOAD: a "#!lua name=<Function>" line, Body, and the
	// registration of main as Function.
	Library string
	// Function is the name of the library and of its one function: "rlctl_" and the first
	// 24 hex digits of Body's SHA1, so that deployments of different policies can share a
	// server.
	Function string

	// lines maps Source's lines back to the files they came from (see Locate). It is
	// metadata: Source and SHA1 do not depend on it.
	lines []segment
	// bounded: every algorithm is a built-in (see Bounded).
	bounded bool
}

// Bounded reports whether every algorithm of the script is a built-in. Every call of such a
// script ends after the work its rules declare (Work, held to Redis by TestRedisWorstCase),
// and each of its loops runs Redis commands as it goes, so a host may watch it at each
// command rather than at every Lua instruction (luahost.Host.FCallBounded). A plugin's Lua
// is the user's: a script with one is not bounded.
func (s *Script) Bounded() bool { return s.bounded }

// segment is a run of Source's lines copied from one file: Source's line first+i is the
// file's line 1+i, for i < n.
type segment struct {
	first, n int
	file     string
	alg      string // the algorithm whose source it is ("" for the prelude and dispatcher)
}

// Commands returns the sorted union of the Redis commands the script may call: the
// dispatcher's own (TIME; GET, SET and DEL for boxes and overrides; EXISTS, SET and DEL
// for lists) and every algorithm's list.
func (s *Script) Commands() []string {
	cmds := []string{"TIME", "GET", "SET", "DEL", "EXISTS"}
	for _, a := range s.Algorithms {
		cmds = append(cmds, a.Commands...)
	}
	slices.Sort(cmds)
	return slices.Compact(cmds)
}

// Algorithm returns the script's algorithm with the given name.
func (s *Script) Algorithm(name string) (*Algorithm, bool) {
	for _, a := range s.Algorithms {
		if a.Name == name {
			return a, true
		}
	}
	return nil, false
}

var validName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// Assemble builds one engine script from algs, in the order given, with rules compiled
// into it (see Compiled). Names must be unique lowercase identifiers, and every rule's
// algorithm one of algs. The same algorithms and rules in the same order always give the
// same script and SHA1.
func Assemble(algs []*Algorithm, rules ...*Compiled) (*Script, error) {
	var b strings.Builder
	var lines []segment
	line := 1 // the line of Source that b's next byte starts on
	write := func(text, file, alg string) {
		if file != "" {
			lines = append(lines, segment{first: line, n: strings.Count(text, "\n") + 1, file: file, alg: alg})
		}
		b.WriteString(text)
		line += strings.Count(text, "\n")
	}
	write(lua.Source("prelude.lua"), "prelude.lua", "")
	seen := map[string]bool{}
	for _, a := range algs {
		if !validName.MatchString(a.Name) {
			return nil, fmt.Errorf("algorithm name %q: use lowercase letters, digits and _, starting with a letter", a.Name)
		}
		if seen[a.Name] {
			return nil, fmt.Errorf("algorithm %q is defined twice", a.Name)
		}
		seen[a.Name] = true
	}
	compiled := make([]*Compiled, len(rules))
	for i, r := range rules {
		c, err := r.check(algs)
		if err != nil {
			return nil, fmt.Errorf("compiled rule %d: %w", i+1, err)
		}
		c.Index = i + 1
		c.name = "@" + strconv.Itoa(c.Index)
		compiled[i] = c
	}
	write("\nlocal builtins = {}\nlocal function load_algorithm(name)\nlocal b = builtins[name]\nif b then\nreturn b[1], b[2], b[3], b[4], b[5], b[6], b[7]\nend\n", "", "")
	for _, a := range algs {
		write(fmt.Sprintf("if name == '%s' then\nlocal params, validate, check, commit, refund, retune, owe\n", a.Name), "", "")
		if !IsBuiltin(a) {
			write(fmt.Sprintf("local subkey = subkey_of({%s})\n", luaStrings(a.Keys)), "", "")
		}
		write(a.Source, a.Name+".lua", a.Name)
		if IsBuiltin(a) {
			// Only a built-in carries a debt (owe): a plugin's contract has no such function.
			write("\nbuiltins[name] = {params, validate or false, check, commit, refund or false, retune or false, owe or false}\nreturn params, validate or false, check, commit, refund or false, retune or false, owe or false\nend\n", "", "")
			continue
		}
		write("\nreturn params, validate or false, check, commit, refund or false, retune or false, false\nend\n", "", "")
	}
	// The comment marks load_algorithm's end for verify's race harness (verify/race.go),
	// which keeps the script up to it: no algorithm's Lua or later text has it.
	write("return nil\nend -- load_algorithm\n\n", "", "")
	write(fastFactories(compiled), "", "")
	write(compiledRules(compiled), "", "")
	var stacks strings.Builder
	writeStacks(&stacks)
	write(stacks.String(), "", "")
	write(lua.Source("dispatch.lua"), "dispatch.lua", "")
	body := b.String()
	bodySum := sha1.Sum([]byte(body))
	fn := "rlctl_" + hex.EncodeToString(bodySum[:])[:24]
	src := body + "\nreturn main(KEYS, ARGV)\n"
	sum := sha1.Sum([]byte(src))
	return &Script{
		Source: src, SHA1: hex.EncodeToString(sum[:]), Algorithms: slices.Clone(algs), Rules: compiled,
		Body: body, Function: fn,
		Library: "#!lua name=" + fn + "\n" + body + "\nredis.register_function('" + fn + "', main)\n",
		lines:   lines,
		bounded: !slices.ContainsFunc(algs, func(a *Algorithm) bool { return !IsBuiltin(a) }),
	}, nil
}

// WithFiles returns a copy of s whose line map names the source files of the algorithms
// in files (algorithm name to file name), such as a plugin's Lua file as its policy named
// it. Locate names an algorithm's lines "<name>.lua" until then, which is the file of a
// built-in (lua/<name>.lua). Source, SHA1 and Algorithms are the same: the copy runs as
// s does.
func (s *Script) WithFiles(files map[string]string) *Script {
	c := *s
	c.lines = slices.Clone(s.lines)
	for i, sg := range c.lines {
		if f, ok := files[sg.alg]; ok && sg.alg != "" && f != "" {
			c.lines[i].file = f
		}
	}
	return &c
}

// Position returns the file and line that line n of Source was copied from: the
// algorithm's file (see WithFiles), "prelude.lua" or "dispatch.lua". ok is false for the
// lines Assemble wrote around the algorithms and for lines outside Source.
func (s *Script) Position(n int) (file string, line int, ok bool) {
	for _, sg := range s.lines {
		if n >= sg.first && n < sg.first+sg.n {
			return sg.file, 1 + n - sg.first, true
		}
	}
	return "", 0, false
}

// scriptLine is how Redis and luahost name a line of a script in an error: the chunk
// name "user_script" (Redis 7; "@user_script" in "on @user_script:N."), or
// "user_function" for the library form, whose first line is its "#!lua" line; then the
// line.
var scriptLine = regexp.MustCompile(`\buser_(script|function):(\d+)\b`)

// Locate rewrites every line of the script an error text names ("user_script:N", as
// Redis 7 and luahost report a Lua error: "ERR user_script:641: attempt to perform
// arithmetic on a nil value") into the file and line it came from
// ("careless_window.lua:17: attempt to …"); see Position. Positions it cannot map, and
// the rest of the text, are kept as they are.
func (s *Script) Locate(text string) string {
	if !strings.Contains(text, "user_script:") && !strings.Contains(text, "user_function:") {
		return text
	}
	return scriptLine.ReplaceAllStringFunc(text, func(m string) string {
		kind, num, _ := strings.Cut(m, ":")
		n, err := strconv.Atoi(num)
		if err != nil {
			return m
		}
		if kind == "user_function" {
			n-- // the library's "#!lua" line
		}
		if file, line, ok := s.Position(n); ok {
			return file + ":" + strconv.Itoa(line)
		}
		return m
	})
}

var defaultScript = sync.OnceValue(func() *Script {
	s, err := Assemble(builtin)
	if err != nil {
		panic("algorithms: built-in script does not assemble: " + err.Error())
	}
	return s
})

// Default returns the script with every built-in algorithm. It is built once and shared.
func Default() *Script { return defaultScript() }

// luaStrings renders names as the items of a Lua table constructor: 'a', 'b'. The names
// are identifiers (dsl checks them), so they need no escaping.
func luaStrings(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + n + "'")
	}
	return b.String()
}
