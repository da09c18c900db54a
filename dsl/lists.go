package dsl

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/zclconf/go-cty/cty"
)

// defaultDenyRetry is the retry-after a deny list states when deny_retry is left out.
const defaultDenyRetry = 3600 * 1_000_000

// lists decodes a rule's runtime lists: exempt = list("name") (a key on it is not limited
// by the rule), deny = list("name") (a key on it is refused), and deny_retry (the
// retry-after a refusal states, a constant duration; default 1h).
func (l *loader) lists(r *Rule, content *hcl.BodyContent) {
	ex, dn, dr := content.Attributes["exempt"], content.Attributes["deny"], content.Attributes["deny_retry"]
	if ex != nil {
		r.Lists.Exempt = l.listName(ex)
	}
	if dn != nil {
		r.Lists.Deny = l.listName(dn)
	}
	if r.Lists.Exempt != "" && r.Lists.Exempt == r.Lists.Deny {
		l.add(errorf(dn.Expr.Range(), "One list both exempts and denies", "Rule %q names list %q for exempt and for deny: a key on it would be both let through and refused. Use two lists.", r.Name, r.Lists.Deny))
		r.Lists = algorithms.Lists{}
		return
	}
	switch {
	case dr != nil && dn == nil:
		l.add(errorf(dr.NameRange, "deny_retry without deny", "deny_retry is the retry-after a key on the deny list is told, so it needs the list: add deny = list(\"...\"), or remove deny_retry."))
	case r.Lists.Deny != "" && dr != nil:
		if us, ok := l.duration(dr, false); ok {
			r.Lists.DenyRetry = us
		}
	case r.Lists.Deny != "":
		r.Lists.DenyRetry = defaultDenyRetry
	}
	if r.Lists.Deny != "" && r.Lists.DenyRetry == 0 {
		r.Lists.Deny = "" // deny_retry was invalid, and said so
	}
}

// listName returns the list a list("name") expression names, or "" after a diagnostic.
func (l *loader) listName(a *hcl.Attribute) string {
	how := "Write it as %s = list(\"name\"): a list is a set of the rule's keys that changes at runtime (rlctl list, Engine.AddToList), and its name is letters, digits, '_', '-' and '.', at most 64."
	if strings.HasSuffix(a.Expr.Range().Filename, ".json") {
		how = "Write it as \"%s\": \"list(\\\"name\\\")\" (in JSON, the call alone in the string, without ${ }): a list is a set of the rule's keys that changes at runtime (rlctl list, Engine.AddToList), and its name is letters, digits, '_', '-' and '.', at most 64."
	}
	call, d := hcl.ExprCall(a.Expr)
	if d.HasErrors() || call.Name != "list" || len(call.Arguments) != 1 {
		l.add(errorf(a.Expr.Range(), "Not a list", how, a.Name))
		return ""
	}
	v, d := call.Arguments[0].Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		l.add(errorf(call.Arguments[0].Range(), "List name not a constant string", how, a.Name))
		return ""
	}
	name := v.AsString()
	if !algorithms.ListName.MatchString(name) {
		l.add(errorf(call.Arguments[0].Range(), "Invalid list name", fmt.Sprintf("%q is not a list name. %s", name, how), a.Name))
		return ""
	}
	return name
}
