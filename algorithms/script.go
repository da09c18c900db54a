package algorithms

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/rlctl/rlctl/lua"
)

// Script is an assembled engine script: the prelude, a set of algorithms and the dispatcher.
type Script struct {
	Source     string       // the Lua program sent to SCRIPT LOAD
	SHA1       string       // lowercase hex SHA1 of Source, the EVALSHA handle
	Algorithms []*Algorithm // in script order
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
	b.WriteString(lua.Source("prelude.lua"))
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
	b.WriteString("\nlocal function load_algorithm(name)\n")
	for _, a := range algs {
		fmt.Fprintf(&b, "if name == '%s' then\nlocal params, validate, check, commit, refund\n%s\nreturn params, validate or false, check, commit, refund or false\nend\n", a.Name, a.Source)
	}
	b.WriteString("return nil\nend\n\n")
	b.WriteString(lua.Source("dispatch.lua"))
	src := b.String()
	sum := sha1.Sum([]byte(src))
	return &Script{Source: src, SHA1: hex.EncodeToString(sum[:]), Algorithms: slices.Clone(algs)}, nil
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
