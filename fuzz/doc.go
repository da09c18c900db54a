// Package fuzz holds rlctl's cross-package fuzz targets; it has no API, only tests.
//
// FuzzCommands is a three-way differential on Redis command traces: each input decodes
// into a short sequence of the commands luahost implements, run on luahost, on miniredis
// and on a real redis-server (started by internal/redistest), with their replies
// compared. Real Redis is the reference: any luahost difference fails, and so does any
// miniredis difference outside the table of known miniredis divergences.
//
// FuzzAlgorithms checks every built-in algorithm and every plugin policy in
// testdata/plugins/correct with verify.Check, on a policy whose parameters and seed come
// from the input, and fails on any property verify reports as failed.
//
// README.md says what each target checks, how to run it and how to reproduce a failure.
package fuzz
