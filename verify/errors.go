package verify

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// This file turns a failed script call (a plugin's Lua runtime error, a command the
// script may not run) into a finding: the request that caused it, the error at the
// plugin's own file and line.

// callError is a script call of a trace that failed: the step (request, or call of a
// race) that caused it, counted from 0.
type callError struct {
	step int
	err  error
}

func (e *callError) Error() string { return fmt.Sprintf("request %d: %v", e.step+1, e.err) }
func (e *callError) Unwrap() error { return e.err }

// pluginFiles returns the Lua file of each of cfg's plugins, by algorithm name: the file
// of cfg.Files whose text is the plugin's source, named as the policy's diagnostics name
// it. When several files hold the same text, the first in name order is taken: their
// lines are the same.
func pluginFiles(cfg *dsl.Config) map[string]string {
	names := make([]string, 0, len(cfg.Files))
	for name := range cfg.Files {
		names = append(names, name)
	}
	slices.Sort(names)
	files := map[string]string{}
	for _, a := range cfg.Plugins {
		for _, name := range names {
			if f := cfg.Files[name]; f != nil && bytes.Equal(f.Bytes, []byte(a.Source)) {
				files[a.Name] = name
				break
			}
		}
	}
	return files
}

// locatedScript returns the script of cfg's plan with the line map naming cfg's plugin
// files.
func locatedScript(s *algorithms.Script, cfg *dsl.Config) *algorithms.Script {
	if len(cfg.Plugins) == 0 {
		return s
	}
	return s.WithFiles(pluginFiles(cfg))
}

// scriptSuffix is what Redis 7 and luahost append to a script's error: the script's SHA1,
// or the function's name for the library form, and the line again.
var scriptSuffix = regexp.MustCompile(` ?script: (?:[0-9a-f]{40}|rlctl_[0-9a-f]{24}), on @[^ ]+:\d+\.$`)

// errorText is err as a finding shows it: the script's lines mapped to their files by
// s, without Redis's "ERR " code and its " script: <sha or function>, on @<file>:<line>." suffix:
// "careless_window.lua:17: cannot perform sub operation between number and nil".
func errorText(s *algorithms.Script, err error) string {
	if ce, ok := err.(*callError); ok {
		err = ce.err // the request is said elsewhere
	}
	msg := scriptSuffix.ReplaceAllString(err.Error(), "")
	return s.Locate(strings.TrimPrefix(msg, "ERR "))
}
