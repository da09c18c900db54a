// Package lua holds the Lua sources of the rlctl engine script: the prelude, the dispatcher
// and one file per built-in algorithm. Package algorithms assembles them into one script;
// nothing else should read these files.
package lua

import "embed"

// Files holds every *.lua file of this directory.
//
//go:embed *.lua
var Files embed.FS

// Source returns the text of one file, e.g. Source("gcra.lua"). It panics if the file does
// not exist: the set of files is fixed at build time.
func Source(name string) string {
	b, err := Files.ReadFile(name)
	if err != nil {
		panic("lua: no embedded file " + name)
	}
	return string(b)
}
