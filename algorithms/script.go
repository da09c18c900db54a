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

// Script is an assembled engine script: the prelude, a set of algorithms and the dispatcher.
type Script struct {
	Source     string       // the Lua program sent to SCRIPT LOAD
	SHA1       string       // lowercase hex SHA1 of Source, the EVALSHA handle
	Algorithms []*Algorithm // in script order

	// lines maps Source's lines back to the files they came from (see Locate). It is
	// metadata: Source and SHA1 do not depend on it.
	lines []segment
}

// segment is a run of Source's lines copied from one file: Source's line first+i is the
// file's line 1+i, for i < n.
type segment struct {
	first, n int
	file     string
	alg      string // the algorithm whose source it is ("" for the prelude and dispatcher)
}

// Commands returns the sorted union of the Redis commands the script may call: the
// dispatcher's TIME and every algorithm's list.
func (s *Script) Commands() []string {
	cmds := []string{"TIME"}
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

// Assemble builds one engine script from algs, in the order given. Names must be unique
// lowercase identifiers. The same algorithms in the same order always give the same SHA1.
func Assemble(algs []*Algorithm) (*Script, error) {
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
	write("\nlocal function load_algorithm(name)\n", "", "")
	for _, a := range algs {
		write(fmt.Sprintf("if name == '%s' then\nlocal params, validate, check, commit, refund\n", a.Name), "", "")
		write(a.Source, a.Name+".lua", a.Name)
		write("\nreturn params, validate or false, check, commit, refund or false\nend\n", "", "")
	}
	write("return nil\nend\n\n", "", "")
	write(lua.Source("dispatch.lua"), "dispatch.lua", "")
	src := b.String()
	sum := sha1.Sum([]byte(src))
	return &Script{Source: src, SHA1: hex.EncodeToString(sum[:]), Algorithms: slices.Clone(algs), lines: lines}, nil
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
// name "user_script" (Redis 7; "@user_script" in "on @user_script:N."), then the line.
var scriptLine = regexp.MustCompile(`\buser_script:(\d+)\b`)

// Locate rewrites every line of the script an error text names ("user_script:N", as
// Redis 7 and luahost report a Lua error: "ERR user_script:641: attempt to perform
// arithmetic on a nil value") into the file and line it came from
// ("careless_window.lua:17: attempt to …"); see Position. Positions it cannot map, and
// the rest of the text, are kept as they are.
func (s *Script) Locate(text string) string {
	if !strings.Contains(text, "user_script:") {
		return text
	}
	return scriptLine.ReplaceAllStringFunc(text, func(m string) string {
		n, err := strconv.Atoi(m[len("user_script:"):])
		if err != nil {
			return m
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
