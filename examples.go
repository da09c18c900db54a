// Package rlctl holds what belongs to the repository as a whole rather than to one
// package: the example policies and the starter policy, embedded so that programs built
// from the module (the browser playground) carry them.
package rlctl

import "embed"

// Policies is the repository's policies/ directory: the example policy files
// (policies/*.hcl) and the plugin Lua sources they name (policies/plugins/*.lua), at the
// paths they have in the repository, so every name starts with "policies/". It is the set
// of files rlctl validate policies reads.
//
//go:embed policies
var Policies embed.FS

// Starter is the policy file rlctl init writes (cmd/rlctl/starter.hcl), which the
// playground opens a new policy file with.
//
//go:embed cmd/rlctl/starter.hcl
var Starter string
