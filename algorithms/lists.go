package algorithms

import (
	"fmt"
	"regexp"
)

// Lists are a rule's runtime lists (a policy's exempt and deny): named sets whose members
// are keys of the rule, each member a key of its own beside the rule's key, read in the
// same script call that decides the rule.
//
//   - A key on the Exempt list is not limited by the rule: the rule allows it and charges
//     nothing, and reports what a peek would (remaining, reset-after, limit).
//   - A key on the Deny list is refused by the rule: denied, remaining 0, retry-after at
//     least DenyRetry (the rule's own, when it would wait longer; Never stays Never),
//     and not charged. A denial by the list is no offence for the rule's penalty box.
//   - A key on both is denied.
//
// Membership lives at ListKey(rule key, list) (dispatch.lua's listed): one EXISTS per list
// per decision, whatever the list's size.
type Lists struct {
	Exempt    string // the exempt list's name; "": none
	Deny      string // the deny list's name; "": none
	DenyRetry int64  // µs a denied key is told to wait, >= 1 with Deny; 0 without
}

// Any reports whether the rule reads a list.
func (l Lists) Any() bool { return l.Exempt != "" || l.Deny != "" }

// ListName is the form of a list's name: letters, digits, '_', '-' and '.', at most 64.
var ListName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// check reports Lists the script refuses.
func (l Lists) check() error {
	for _, n := range []string{l.Exempt, l.Deny} {
		if n != "" && !ListName.MatchString(n) {
			return fmt.Errorf("list name %q: want letters, digits, '_', '-' or '.', at most 64", n)
		}
	}
	if l.Deny != "" && (l.DenyRetry < 1 || l.DenyRetry > MaxInt) || l.Deny == "" && l.DenyRetry != 0 {
		return fmt.Errorf("deny list retry %d µs out of range: want [1, 2^53] with a deny list, 0 without", l.DenyRetry)
	}
	return nil
}

// listSuffix starts the suffix of a list member's key (prelude.lua's LIST).
const listSuffix = ":!in:"

// ListKey returns the key that marks the key ruleKey of a rule as a member of list.
func ListKey(ruleKey, list string) string { return ruleKey + listSuffix + list }

// listOn is which of a rule's lists its key is on.
type listOn int

const (
	listNone listOn = iota
	listExempt
	listDeny
)

// on is the reference model's reading of the lists a rule's key is on, given the members
// set: the deny list first.
func (l Lists) on(key string, members map[string]bool) listOn {
	switch {
	case l.Deny != "" && members[ListKey(key, l.Deny)]:
		return listDeny
	case l.Exempt != "" && members[ListKey(key, l.Exempt)]:
		return listExempt
	}
	return listNone
}

// verdict is the reference verdict of a rule whose key is on a list, from its check r (a
// peek, for an exempt key).
func (l Lists) verdict(on listOn, r RuleResult) RuleResult {
	if on == listExempt {
		r.Allowed, r.RetryAfter = true, 0
		return r
	}
	r.Allowed, r.Remaining = false, 0
	if r.RetryAfter != Never {
		r.RetryAfter = max(r.RetryAfter, l.DenyRetry)
	}
	return r
}
