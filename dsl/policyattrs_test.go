package dsl

import (
	"reflect"
	"slices"
	"testing"
)

// A scenario's attribute is read by the policy when any expression that decides its
// requests reads it: match, shard, every rule's key, when, cost and parameters, and every
// unlimited block's when. stats_key only names statistics.
func TestPolicyAttrsCoversEveryExpression(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(`
policy "p" {
  match = request.a != "x" && request.b != ""
  shard = request.b
  rule "r" {
    algorithm = "gcra"
    key       = "${request.b}:${request.c}"
    when      = request.d != ""
    cost      = request.e == "big" ? 5 : 1
    rate      = "10/s"
    burst     = lookup({ x = 1 }, request.f, 5)
    stats_key = request.g
  }
  unlimited "u" {
    when = request.h != ""
  }
}
`)})
	if diags.HasErrors() {
		t.Fatal(diags.Errs())
	}
	got := sortedKeys(policyAttrs(cfg.Policies[0]))
	if want := []string{"a", "b", "c", "d", "e", "f", "h"}; !slices.Equal(got, want) {
		t.Errorf("policyAttrs reads %v, want %v", got, want)
	}
	// Every expression field of a policy's types is one of those above: a new one must be
	// added to policyAttrs when it decides requests, and to this list.
	known := []string{"Policy.Match", "Policy.Shard", "Rule.Key", "Rule.When", "Rule.Cost", "Rule.StatsKey", "Param.Expr", "Unlimited.When"}
	var fields []string
	for _, typ := range []reflect.Type{reflect.TypeFor[Policy](), reflect.TypeFor[Rule](), reflect.TypeFor[Param](), reflect.TypeFor[Unlimited]()} {
		for f := range typ.Fields() {
			if f.Type == reflect.TypeFor[*Expr]() || f.Type == reflect.TypeFor[[]*Expr]() {
				fields = append(fields, typ.Name()+"."+f.Name)
			}
		}
	}
	slices.Sort(fields)
	slices.Sort(known)
	if !slices.Equal(fields, known) {
		t.Errorf("the expression fields are %v; policyAttrs was written for %v", fields, known)
	}
}
