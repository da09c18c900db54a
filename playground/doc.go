// Package playground is rlctl's validate, fmt, simulate and verify over text buffers: the
// API the browser playground calls through playground/wasm, compiled to WebAssembly.
// Everything here is pure Go, reads no files and builds for every GOOS.
//
// Files are a map from name to content, the names the CLI would be given relative to its
// working directory: policy files end in .hcl (native syntax) or .json (JSON syntax); any
// other entry, such as a plugin's Lua, is there for an algorithm block's source attribute,
// resolved relative to the policy file that names it. For the same files, options and
// seed, every Text is byte for byte what the rlctl command prints, stdout and stderr in
// the order it prints them, run in a directory holding the files and given every policy
// file in sorted order: rlctl validate a.hcl b.hcl, rlctl simulate [-scenario NAME]
// [-seed N] …, rlctl verify [-seed N] [-budget N] [-duration D] …. Diagnostics, which that
// text renders, come apart as well, for an editor to mark.
//
// Session decides one request at a time on files, as the engine would on Redis, with an
// in-process Redis and a virtual clock that keep their state from one decision to the next.
//
// The results marshal to JSON with snake_case names; playground/wasm returns them so.
package playground
