package dsl_test

import (
	"fmt"
	"os"

	"github.com/rlctl/rlctl/dsl"
)

// A policy with a mistake, and what rlctl validate shows for it.
func Example() {
	src := []byte(`policy "login" {
  match = request.path == "/login"

  rule "per_ip" {
    algorithm = "sliding_log"
    when      = request.ip != ""
    key       = request.ip
    limit     = 20
    window    = "10min"
  }
}
`)
	cfg, diags := dsl.Parse(map[string][]byte{"login.hcl": src})
	dsl.WriteDiagnostics(os.Stdout, cfg.Files, diags, 80, false)
	// Output:
	// Error: Invalid window
	//
	//   on login.hcl line 9, in policy "login":
	//    9:     window    = "10min"
	//
	// The duration "10min" has the unknown unit "min". Did you mean "m"? Write a
	// duration as a whole number followed by a unit, such as "250ms", "30s", "1m",
	// "1h" or "1d", or as a sum, largest unit first, such as "1m30s". Units: ms, s, m,
	// h, d.
}

// request is a Request backed by a map.
type request map[string]string

func (r request) Attr(name string) string { return r[name] }

// Rendering a rule's key and parameters for a request.
func ExampleRule_Wire() {
	cfg, diags := dsl.Parse(map[string][]byte{"api.hcl": []byte(`locals {
  burst = { free = 20, pro = 100 }
}

policy "api" {
  rule "per_user" {
    algorithm = "gcra"
    when      = request.user != ""
    key       = "${request.tenant}:${request.user}"
    rate      = "10/s"
    burst     = lookup(local.burst, request.plan, 20)
  }
}
`)})
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	rule := cfg.Policies[0].Rules[0]
	r := request{"tenant": "acme", "user": "alice", "plan": "pro"}
	key, _ := rule.Key.String(r)
	wire, _ := rule.Wire(r)
	fmt.Println(key, wire) // gcra's wire values: rate amount, rate period (µs), burst
	// Output: acme:alice [1 100000 100]
}
