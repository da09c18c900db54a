package dsl

import (
	"embed"
	"strings"
)

//go:embed help/*.txt
var helpFiles embed.FS

// Topic is a short reference to one part of the language: what rlctl help TOPIC prints
// and the playground's quick reference shows. docs/policies.md is the full reference.
type Topic struct {
	Name  string `json:"name"`  // "policy", "scenario" or "plugins"
	Short string `json:"short"` // one line for a list of topics
	Text  string `json:"text"`  // the reference, wrapped at 88 columns
}

// Topics returns the short references, in the order to read them.
func Topics() []Topic {
	topics := []Topic{
		{Name: "policy", Short: "the policy language: policy, rule, locals, budget, expressions"},
		{Name: "scenario", Short: "scenarios: traffic, faults and expectations that rlctl simulate checks"},
		{Name: "plugins", Short: "write a rate-limiting algorithm in Lua, declare it in HCL, verify it"},
	}
	for i := range topics {
		b, err := helpFiles.ReadFile("help/" + topics[i].Name + ".txt")
		if err != nil {
			panic("dsl: the reference of " + topics[i].Name + " is not embedded: " + err.Error())
		}
		topics[i].Text = strings.ReplaceAll(string(b), "\r\n", "\n")
	}
	return topics
}
