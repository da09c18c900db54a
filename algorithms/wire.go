package algorithms

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Protocol is the version of the ARGV contract the dispatcher speaks (its layout and the
// values each parameter kind takes: see Param.Min); a mismatch is an error reply. It
// matches PROTOCOL in lua/prelude.lua.
const Protocol = "7"

// Op selects what a call does.
type Op string

const (
	// OpCheck decides the call's rules and charges them all or none.
	OpCheck Op = "check"
	// OpRefund undoes a charge (cluster compensation, concurrency release).
	OpRefund Op = "refund"
	// OpOwe charges every rule its cost without a check: the overdraft of a settled
	// reservation, which may take a key past its limit into a debt it earns back (as its
	// algorithm earns back any charge) before it admits again. Every rule charged must be
	// of an algorithm that CarriesDebt, else the call is an error and writes nothing; a key
	// on its rule's exempt list is charged nothing. The reply is a check's, allowed, each
	// rule's values those of a peek (cost 0) at the key afterwards, without its lists and
	// box: a key in debt is denied, with the retry-after until the debt is earned back.
	OpOwe Op = "owe"
	// OpMost is a partial admission: it decides and charges, all or none, the largest
	// number of units g <= Call.Units that every enforcing rule allows at once, each
	// Rule.Cost being the rule's cost per unit. Reply.Granted is g; a denial (g = 0)
	// describes the rules as a check of one unit would, so its retry-after is the wait
	// for one unit.
	OpMost Op = "most"
	// OpDelay decides and charges, all or none, at the earliest instant within
	// Call.MaxDelay of the call's at which every enforcing rule allows it: at once when
	// they do, else at now + d, d the longest retry-after of the enforcing rules that deny,
	// when that is within MaxDelay and they all allow it then (a reservation of that
	// slot; the caller waits d before going on). Reply.Delay is d; a denial (a cost that
	// never fits, a wait beyond MaxDelay, a rule that still denies at now + d) is the
	// check's at now, with Delay -1. A waiting call's rule values are as seen at now + d,
	// its reset-afters counted from now.
	OpDelay Op = "delay"
	// OpOverride sets (Call.Override) or clears (Call.Override nil) the override of the
	// call's one rule, an Overridable one, for its key, converting the key's state to the
	// new figures (see Override). The reply has no rules.
	OpOverride Op = "override"
	// OpList adds the key of the call's one rule, a rule with Lists, to list Call.List
	// (Call.Action ListAdd), removes it (ListRemove) or reads whether it is a member
	// (ListRead: Reply.Member). The reply has no rules.
	OpList Op = "list"
	// OpInspect reads what the call's one rule keeps beside its key (Reply.Further): the
	// block running, the override in force (one whose end has come is ended first, as a
	// decision would), the key's list memberships. It charges nothing.
	OpInspect Op = "inspect"
)

// ListAction is what an OpList call does.
type ListAction string

const (
	ListAdd    ListAction = "+"
	ListRemove ListAction = "-"
	ListRead   ListAction = "?"
)

// ServerTime as Call.Now makes the script read the server clock (Redis TIME).
const ServerTime int64 = -1

// Never is the retry-after of a request whose cost exceeds a rule's capacity: it can never
// be allowed, and no finite wait is offered.
const Never int64 = -1

// Call is one invocation of the engine script.
type Call struct {
	Op  Op
	Now int64 // microseconds since the Unix epoch, or ServerTime
	// Deadline, when positive, is the server-clock instant (µs since the Unix epoch) after
	// which the caller no longer waits: a server that runs the call later writes nothing
	// and replies with an error starting "RLCTL deadline passed". 0: no deadline.
	Deadline int64
	// Skew, for a client-clock call, is how far apart (µs) the callers' clocks may be:
	// every TTL the algorithms set through expire_us is that much longer, so that a key
	// outlives its state as a caller whose clock runs behind sees it. 0: none.
	Skew int64
	// Units, for OpMost, is the most units the call may grant (>= 1).
	Units int64
	// MaxDelay, for OpDelay, is the longest the call may wait for its slot (µs, >= 0).
	MaxDelay int64
	// Override, for OpOverride, is the override to set; nil clears it.
	Override *Override
	// Read, for OpOverride, reads the override in force (Reply.Override) instead of
	// changing it; one whose end has come is ended first, as a decision would.
	Read bool
	// List and Action, for OpList, name the list and what to do with the rule's key.
	List   string
	Action ListAction
	Rules  []Rule
}

// Rule is one rule of a call.
type Rule struct {
	Key       string     // the rule's Redis key; keys of one call must differ
	Algorithm *Algorithm // must belong to the script the call runs on
	Cost      int64      // >= 0; 0 is a peek that writes nothing
	Shadow    bool       // evaluated and charged, never enforced
	Params    []int64    // Algorithm.WireLen() values; a Lease slot holds 0
	Lease     string     // the value of a Lease slot
	// Box is the rule's penalty box; the zero Box is none.
	Box Box
	// Overridable rules decide each key with its override's figures while it has one
	// (Override), read in the same call.
	Overridable bool
	// Lists are the rule's exempt and deny lists, read in the same call; the zero Lists
	// is none.
	Lists Lists
	// Calendar rules (of an algorithm that is Calendared) count in calendar periods:
	// their window is the period of Span that holds the call's instant, and their window
	// parameter only states the shortest period's length (for guarantees and headers).
	Calendar bool
	// Span is a Calendar rule's periods around the caller's clock (SpanAround), sent
	// with every call.
	Span Span
	// Compiled, when set, is the rule of the call's script this rule is: the call names
	// it and sends its cost and the values at Compiled.Vary only. Algorithm, Shadow and
	// the constant Params must be the compiled rule's.
	Compiled *Compiled
}

// Keys returns the call's KEYS.
func (c *Call) Keys() []string {
	keys := make([]string, len(c.Rules))
	for i := range c.Rules {
		keys[i] = c.Rules[i].Key
	}
	return keys
}

// Argv returns the call's ARGV. It checks what the script would reject, so a malformed
// call fails here with a Go error instead of as an error reply.
func (c *Call) Argv() ([]string, error) {
	var buf [24]any // a call of up to three rules appends in place
	args, err := c.AppendArgs(buf[:0])
	if err != nil {
		return nil, err
	}
	return ArgStrings(args), nil
}

// ArgStrings returns command arguments in the forms AppendArgs appends (string, *string,
// int64, *int64) as the strings they stand for; any other value as fmt prints it.
func ArgStrings(args []any) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			out[i] = a
		case *string:
			out[i] = *a
		case int64:
			out[i] = strconv.FormatInt(a, 10)
		case *int64:
			out[i] = strconv.FormatInt(*a, 10)
		default:
			out[i] = fmt.Sprint(a)
		}
	}
	return out
}

// Values a call's arguments repeat, converted to interfaces once: a string or an integer
// above 255 converted to an interface is copied to the heap.
var (
	argProtocol any = Protocol
	argCheck    any = string(OpCheck)
	argRefund   any = string(OpRefund)
	argOwe      any = string(OpOwe)
	argNone     any = ""
	argFlags        = [32]any{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31"} // shadow (1), penalty box (2), overridable (4), lists (8), calendar (16)
)

// AppendArgs appends the call's ARGV to dst as arguments of a go-redis command, in the
// forms its writer formats without allocating: strings, *string, int64 and *int64, each
// of which formats to the value Argv gives at its place. Keys, costs, leases and varying
// parameters are pointers into c, so c must not change until the command has been written.
// It checks what Argv checks.
func (c *Call) AppendArgs(dst []any) ([]any, error) {
	op := argCheck
	switch c.Op {
	case OpCheck:
	case OpRefund:
		op = argRefund
	case OpOwe:
		op = argOwe
	case OpMost:
		if c.Units < 1 || c.Units > MaxInt {
			return nil, fmt.Errorf("units %d out of range [1, 2^53]", c.Units)
		}
		op = "most:" + strconv.FormatInt(c.Units, 10)
	case OpDelay:
		if c.MaxDelay < 0 || c.MaxDelay > MaxInt {
			return nil, fmt.Errorf("max delay %d out of range [0, 2^53]", c.MaxDelay)
		}
		op = "delay:" + strconv.FormatInt(c.MaxDelay, 10)
	case OpOverride:
		op = string(OpOverride)
		if len(c.Rules) != 1 || !c.Rules[0].Overridable {
			return nil, fmt.Errorf("an override call takes one overridable rule")
		}
		if o := c.Override; o != nil && !c.Read {
			r := &c.Rules[0]
			if o.Until < 0 || o.Until > MaxInt {
				return nil, fmt.Errorf("override until %d out of range [0, 2^53]", o.Until)
			}
			if err := r.Algorithm.CheckOverride(r.Params, o.Params); err != nil {
				return nil, err
			}
		}
	case OpInspect:
		op = string(OpInspect)
		if len(c.Rules) != 1 {
			return nil, fmt.Errorf("an inspect call takes one rule")
		}
	case OpList:
		op = string(OpList)
		if len(c.Rules) != 1 || !c.Rules[0].Lists.Any() {
			return nil, fmt.Errorf("a list call takes one rule with lists")
		}
		if l := c.Rules[0].Lists; c.List == "" || c.List != l.Exempt && c.List != l.Deny {
			return nil, fmt.Errorf("list %q is not one of the rule's", c.List)
		}
		if c.Action != ListAdd && c.Action != ListRemove && c.Action != ListRead {
			return nil, fmt.Errorf("list action %q: want %q, %q or %q", c.Action, ListAdd, ListRemove, ListRead)
		}
	default:
		return nil, fmt.Errorf("unknown op %q", c.Op)
	}
	if c.Now < 0 && c.Now != ServerTime {
		return nil, fmt.Errorf("negative time %d", c.Now)
	}
	if c.Deadline < 0 {
		return nil, fmt.Errorf("negative deadline %d", c.Deadline)
	}
	if c.Skew < 0 || c.Skew > MaxInt {
		return nil, fmt.Errorf("clock skew %d out of range [0, 2^53]", c.Skew)
	}
	now, deadline, skew := argNone, argNone, argNone
	if c.Now != ServerTime {
		now = &c.Now
	}
	if c.Deadline > 0 {
		deadline = &c.Deadline
	}
	if c.Skew > 0 {
		skew = &c.Skew
	}
	dst = append(dst, argProtocol, op, now, deadline, skew, int64(len(c.Rules)))
	var seen map[string]int
	if len(c.Rules) > 32 {
		seen = make(map[string]int, len(c.Rules))
	}
	for i := range c.Rules {
		r := &c.Rules[i]
		if r.Algorithm == nil {
			return nil, fmt.Errorf("rule %d: no algorithm", i+1)
		}
		if j := c.keyBefore(i, seen); j >= 0 {
			return nil, fmt.Errorf("rule %d: key %q repeats rule %d", i+1, r.Key, j+1)
		}
		if r.Cost < 0 || r.Cost > MaxInt {
			return nil, fmt.Errorf("rule %d: cost %d out of range [0, 2^53]", i+1, r.Cost)
		}
		if c.Op == OpMost && r.Cost > 0 && c.Units > MaxInt/r.Cost {
			return nil, fmt.Errorf("rule %d: cost %d per unit times %d units is above 2^53", i+1, r.Cost, c.Units)
		}
		if r.Compiled != nil {
			var err error
			if dst, err = r.appendCompiled(dst); err != nil {
				return nil, fmt.Errorf("rule %d: %w", i+1, err)
			}
			continue
		}
		if err := r.Algorithm.Validate(r.Params); err != nil {
			return nil, fmt.Errorf("rule %d: %w", i+1, err)
		}
		if err := r.Box.check(); err != nil {
			return nil, fmt.Errorf("rule %d: %w", i+1, err)
		}
		if r.Overridable && !r.Algorithm.Overridable() {
			return nil, fmt.Errorf("rule %d: %s takes no overrides", i+1, r.Algorithm.Name)
		}
		if err := r.Lists.check(); err != nil {
			return nil, fmt.Errorf("rule %d: %w", i+1, err)
		}
		if err := r.checkCalendar(); err != nil {
			return nil, fmt.Errorf("rule %d: %w", i+1, err)
		}
		f := 0
		if r.Shadow {
			f |= 1
		}
		if r.Box.For > 0 {
			f |= 2
		}
		if r.Overridable {
			f |= 4
		}
		if r.Lists.Any() {
			f |= 8
		}
		if r.Calendar {
			f |= 16
		}
		dst = append(dst, r.Algorithm.Name, &r.Cost, argFlags[f])
		if r.Box.For > 0 {
			dst = append(dst, &r.Box.For, &r.Box.Max)
		}
		if r.Lists.Any() {
			dst = append(dst, &r.Lists.Exempt, &r.Lists.Deny, &r.Lists.DenyRetry)
		}
		dst = r.appendSpan(dst)
		for j := range r.Params {
			if r.Algorithm.IsLeaseSlot(j) {
				if r.Lease == "" {
					return nil, fmt.Errorf("rule %d: %s needs a lease id", i+1, r.Algorithm.Name)
				}
				dst = append(dst, &r.Lease)
				continue
			}
			dst = append(dst, &r.Params[j])
		}
	}
	if c.Op == OpList {
		return append(dst, &c.List, string(c.Action)), nil
	}
	if c.Op == OpOverride {
		if c.Read {
			return append(dst, "?"), nil
		}
		if c.Override == nil {
			return append(dst, argNone), nil
		}
		dst = append(dst, c.Override.Encode(c.Rules[0].Algorithm, c.Rules[0].Params))
	}
	return dst, nil
}

// Compile returns r named as the compiled rule c (nil: r as it is): Compiled set to c,
// and the flags a compiled rule holds as constants of the script (shadow, penalty box,
// overridable, lists, calendar) set to c's, as its calls must carry them.
func (r Rule) Compile(c *Compiled) Rule {
	if c != nil {
		r.Compiled, r.Shadow, r.Box, r.Overridable, r.Lists, r.Calendar = c, c.Shadow, c.Box, c.Overridable, c.Lists, c.Calendar
	}
	return r
}

// keyBefore returns the index of an earlier rule of c with rule i's key, or -1. Calls
// have a few rules, so it compares; a call of many rules keeps the keys in seen.
func (c *Call) keyBefore(i int, seen map[string]int) int {
	if seen == nil {
		for j := range i {
			if c.Rules[j].Key == c.Rules[i].Key {
				return j
			}
		}
		return -1
	}
	if j, ok := seen[c.Rules[i].Key]; ok {
		return j
	}
	seen[c.Rules[i].Key] = i
	return -1
}

// appendCompiled appends the compiled rule r's values to dst: "@<index>", its cost, and
// the values at its varying positions. The constants were validated when the script was
// assembled; a rule whose own values vary is validated whole.
func (r *Rule) appendCompiled(dst []any) ([]any, error) {
	c := r.Compiled
	if r.Algorithm != c.Algorithm || r.Shadow != c.Shadow || r.Box != c.Box || r.Overridable != c.Overridable || r.Lists != c.Lists || r.Calendar != c.Calendar || len(r.Params) != len(c.Params) {
		return nil, fmt.Errorf("does not match compiled rule %d (%s)", c.Index, c.Algorithm.Name)
	}
	leasesOnly, v := true, 0
	for j, p := range r.Params {
		if v < len(c.Vary) && c.Vary[v] == j {
			leasesOnly = leasesOnly && c.Algorithm.IsLeaseSlot(j)
			v++
		} else if p != c.Params[j] {
			return nil, fmt.Errorf("parameter value %d is %d, compiled rule %d holds %d", j+1, p, c.Index, c.Params[j])
		}
	}
	if !leasesOnly {
		if err := r.Algorithm.Validate(r.Params); err != nil {
			return nil, err
		}
	}
	name := c.name
	if name == nil {
		name = "@" + strconv.Itoa(c.Index)
	}
	if err := r.checkCalendar(); err != nil {
		return nil, err
	}
	dst = r.appendSpan(append(dst, name, &r.Cost))
	for _, j := range c.Vary {
		if c.Algorithm.IsLeaseSlot(j) {
			if r.Lease == "" {
				return nil, fmt.Errorf("%s needs a lease id", r.Algorithm.Name)
			}
			dst = append(dst, &r.Lease)
			continue
		}
		dst = append(dst, &r.Params[j])
	}
	return dst, nil
}

// Reply is the decoded answer of a check call.
type Reply struct {
	Allowed bool
	Decider int   // 1-based index of the first enforcing rule that denied; 0 when allowed
	Now     int64 // the instant the script decided at, in microseconds
	// Server is the server's clock when it ran the call (µs); it equals Now unless the
	// call carried a client time. Callers place deadlines on the server's clock with it.
	Server int64
	Rules  []RuleResult
	// Granted, for OpMost, is the units the call granted and charged: 0 when denied.
	Granted int64
	// Delay, for OpDelay, is how long the caller waits for its slot (µs): 0 when allowed
	// at once, -1 when denied.
	Delay int64
	// Override, for an OpOverride call that reads (Call.Read), is the override in force;
	// nil when none is.
	Override *Override
	// Member, for an OpList call, is whether the rule's key is on the list after it.
	Member bool
	// Further, for an OpInspect call, is what the rule keeps beside its key.
	Further *Further
}

// Further is what a rule keeps beside its key, as an OpInspect call reads it.
type Further struct {
	// BlockEnd is the end (µs) of the penalty box's block running at the call's instant;
	// 0: none.
	BlockEnd int64
	// Override is the override in force; nil: none.
	Override *Override
	// Exempt and Deny report the key on the rule's exempt and deny lists.
	Exempt, Deny bool
}

// RuleResult is one rule's verdict. Values describe the key after the call: charged when
// the call was allowed, untouched when it was denied.
type RuleResult struct {
	Allowed    bool  // this rule alone would allow the request
	Remaining  int64 // the largest cost this rule would allow right now
	RetryAfter int64 // µs until the same request fits this rule (0 when allowed, Never)
	ResetAfter int64 // µs until the key is back to its empty state
	Limit      int64 // the rule's limit, capacity, burst or max
}

// ErrReply reports a reply that does not have the dispatcher's shape.
var ErrReply = errors.New("malformed engine script reply")

// header is the number of values before the per-rule ones in a check reply.
const header = 4

// CheckContract is what an algorithm's check function returns, as the dispatcher reads it
// (lua/dispatch.lua); diagnostics of a check that returns anything else quote it.
const CheckContract = "return allowed (1 or 0), remaining, retry_after_us (0 when allowed, -1 when the cost can never fit), reset_after_us, limit[, pending]"

// ruleFields names a rule's five reply values, as CheckContract does.
var ruleFields = [5]string{"allowed", "remaining", "retry_after_us", "reset_after_us", "limit"}

// badRuleValue describes reply value i (0-based, i >= header), which is not an integer
// (got) or missing (got == nil and missing): the rule and field it is, and what check must
// return. Lua false arrives as nil, and Lua nil ends the array, so missing values are nils.
func badRuleValue(i int, got any, missing bool) error {
	r, f := (i-header)/5+1, ruleFields[(i-header)%5]
	what := fmt.Sprintf("is %T", got)
	switch got := got.(type) {
	case nil:
		what = "is false"
		if missing {
			what = "is nil (a Lua nil cuts the reply short)"
		}
	case string:
		what = fmt.Sprintf("is the string %.40q", got)
	case []any:
		what = "is a table"
	case error:
		what = "is an error reply"
	}
	return fmt.Errorf("%w: rule %d's %s (value %d) %s, want an integer; the rule's algorithm's check must %s", ErrReply, r, f, i+1, what, CheckContract)
}

// IsDeadlineError reports whether err is the script's reply to a call that the server ran
// after the call's Deadline: the call wrote nothing.
func IsDeadlineError(err error) bool {
	_, ok := DeadlineServerTime(err)
	return ok
}

// DeadlineServerTime returns the server's clock (µs since the Unix epoch) that a deadline
// error reply carries, and whether err is one; the time is 0 when the reply has none.
func DeadlineServerTime(err error) (int64, bool) {
	const prefix = "RLCTL deadline passed"
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		return 0, false
	}
	rest, ok := strings.CutPrefix(err.Error()[len(prefix):], " at ")
	if !ok {
		return 0, true
	}
	var sec, usec int64
	if n, _ := fmt.Sscanf(rest, "%d %d:", &sec, &usec); n != 2 || sec < 0 || usec < 0 || usec >= 1e6 || sec > MaxInt/1_000_000-1 {
		return 0, true
	}
	return sec*1e6 + usec, true
}

// DecodeReply decodes the reply of a check call with n rules. v is what go-redis (RESP2)
// or luahost returns: []any of int64.
func DecodeReply(v any, n int) (Reply, error) {
	arr, ok := v.([]any)
	if !ok {
		return Reply{}, fmt.Errorf("%w: %T, want an array", ErrReply, v)
	}
	return decodeRules(arr, n)
}

// DecodeCallReply decodes the reply of call c: a check, a partial admission (OpMost,
// whose reply ends with the units granted) or an override's change or read.
func DecodeCallReply(c *Call, v any) (Reply, error) {
	if c.Op == OpOverride {
		return decodeOverrideReply(c, v)
	}
	if c.Op == OpList {
		return decodeListReply(v)
	}
	if c.Op == OpInspect {
		return decodeInspectReply(c, v)
	}
	if c.Op == OpDelay {
		return decodeDelayReply(c, v)
	}
	if c.Op != OpMost {
		return DecodeReply(v, len(c.Rules))
	}
	arr, ok := v.([]any)
	if !ok {
		return Reply{}, fmt.Errorf("%w: %T, want an array", ErrReply, v)
	}
	n := len(c.Rules)
	if len(arr) != header+5*n+1 {
		return Reply{}, fmt.Errorf("%w: %d values for a partial admission of %d rules, want %d", ErrReply, len(arr), n, header+5*n+1)
	}
	g, ok := arr[len(arr)-1].(int64)
	if !ok || g < 0 || g > c.Units {
		return Reply{}, fmt.Errorf("%w: granted %v of %d units", ErrReply, arr[len(arr)-1], c.Units)
	}
	r, err := decodeRules(arr[:len(arr)-1], n)
	if err != nil {
		return Reply{}, err
	}
	if r.Allowed != (g > 0) {
		return Reply{}, fmt.Errorf("%w: granted %d units, allowed %v", ErrReply, g, r.Allowed)
	}
	r.Granted = g
	return r, nil
}

// decodeDelayReply decodes an OpDelay reply: a check's, then the wait.
func decodeDelayReply(c *Call, v any) (Reply, error) {
	arr, ok := v.([]any)
	if !ok {
		return Reply{}, fmt.Errorf("%w: %T, want an array", ErrReply, v)
	}
	n := len(c.Rules)
	if len(arr) != header+5*n+1 {
		return Reply{}, fmt.Errorf("%w: %d values for a delayed call of %d rules, want %d", ErrReply, len(arr), n, header+5*n+1)
	}
	d, ok := arr[len(arr)-1].(int64)
	if !ok || d < -1 || d > c.MaxDelay {
		return Reply{}, fmt.Errorf("%w: a wait of %v, at most %d", ErrReply, arr[len(arr)-1], c.MaxDelay)
	}
	r, err := decodeRules(arr[:len(arr)-1], n)
	if err != nil {
		return Reply{}, err
	}
	if r.Allowed != (d >= 0) {
		return Reply{}, fmt.Errorf("%w: a wait of %d, allowed %v", ErrReply, d, r.Allowed)
	}
	r.Delay = d
	return r, nil
}

// decodeRules decodes a check reply's header and n rules' values.
func decodeRules(arr []any, n int) (Reply, error) {
	if len(arr) != header+5*n {
		if header <= len(arr) && len(arr) < header+5*n {
			return Reply{}, badRuleValue(len(arr), nil, true)
		}
		return Reply{}, fmt.Errorf("%w: %d values for %d rules, want %d", ErrReply, len(arr), n, header+5*n)
	}
	var head [header]int64
	for i, x := range arr {
		v, ok := x.(int64)
		if !ok {
			if i >= header {
				return Reply{}, badRuleValue(i, x, false)
			}
			return Reply{}, fmt.Errorf("%w: value %d is %T, want an integer", ErrReply, i+1, x)
		}
		if i < header {
			head[i] = v
		}
	}
	r := Reply{Allowed: head[0] == 1, Decider: int(head[1]), Now: head[2], Server: head[3], Rules: make([]RuleResult, n)}
	if head[0] != 0 && head[0] != 1 || r.Decider < 0 || r.Decider > n || r.Allowed != (r.Decider == 0) {
		return Reply{}, fmt.Errorf("%w: header %v", ErrReply, head)
	}
	for i := range r.Rules {
		o := arr[header+5*i:]
		r.Rules[i] = RuleResult{Allowed: o[0].(int64) == 1, Remaining: o[1].(int64), RetryAfter: o[2].(int64), ResetAfter: o[3].(int64), Limit: o[4].(int64)}
	}
	return r, nil
}

// decodeOverrideReply decodes the reply of an OpOverride call: {1, 0, now, server}, and
// for a read the override in force ("" for none).
func decodeOverrideReply(c *Call, v any) (Reply, error) {
	arr, ok := v.([]any)
	want := header
	if c.Read {
		want++
	}
	if !ok || len(arr) != want || arr[0] != int64(1) || arr[1] != int64(0) {
		return Reply{}, fmt.Errorf("%w: %v for an override call", ErrReply, v)
	}
	now, ok1 := arr[2].(int64)
	server, ok2 := arr[3].(int64)
	if !ok1 || !ok2 {
		return Reply{}, fmt.Errorf("%w: %v for an override call", ErrReply, v)
	}
	r := Reply{Allowed: true, Now: now, Server: server}
	if !c.Read {
		return r, nil
	}
	s, ok := arr[4].(string)
	if !ok {
		return Reply{}, fmt.Errorf("%w: override %v, want a string", ErrReply, arr[4])
	}
	if s != "" {
		o, err := DecodeOverride(c.Rules[0].Algorithm, s)
		if err != nil {
			return Reply{}, fmt.Errorf("%w: %v", ErrReply, err)
		}
		r.Override = &o
	}
	return r, nil
}

// decodeListReply decodes the reply of an OpList call: {1, 0, now, server, member}, member
// 1 or 0.
func decodeListReply(v any) (Reply, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != header+1 || arr[0] != int64(1) || arr[1] != int64(0) {
		return Reply{}, fmt.Errorf("%w: %v for a list call", ErrReply, v)
	}
	now, ok1 := arr[2].(int64)
	server, ok2 := arr[3].(int64)
	m, ok3 := arr[4].(int64)
	if !ok1 || !ok2 || !ok3 || m != 0 && m != 1 {
		return Reply{}, fmt.Errorf("%w: %v for a list call", ErrReply, v)
	}
	return Reply{Allowed: true, Now: now, Server: server, Member: m == 1}, nil
}

// decodeInspectReply decodes the reply of an OpInspect call: {1, 0, now, server, block
// end, override or "", exempt (1 or 0), deny (1 or 0)}.
func decodeInspectReply(c *Call, v any) (Reply, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != header+4 || arr[0] != int64(1) || arr[1] != int64(0) {
		return Reply{}, fmt.Errorf("%w: %v for an inspect call", ErrReply, v)
	}
	now, ok1 := arr[2].(int64)
	server, ok2 := arr[3].(int64)
	end, ok3 := arr[4].(int64)
	o, ok4 := arr[5].(string)
	ex, ok5 := arr[6].(int64)
	dn, ok6 := arr[7].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || end < 0 || ex != 0 && ex != 1 || dn != 0 && dn != 1 {
		return Reply{}, fmt.Errorf("%w: %v for an inspect call", ErrReply, v)
	}
	f := &Further{BlockEnd: end, Exempt: ex == 1, Deny: dn == 1}
	if o != "" {
		ov, err := DecodeOverride(c.Rules[0].Algorithm, o)
		if err != nil {
			return Reply{}, fmt.Errorf("%w: %v", ErrReply, err)
		}
		f.Override = &ov
	}
	return Reply{Allowed: true, Now: now, Server: server, Further: f}, nil
}

// checkCalendar reports whether a Calendar rule's algorithm takes a calendar and its Span
// is well formed.
func (r *Rule) checkCalendar() error {
	if !r.Calendar {
		return nil
	}
	if !r.Algorithm.Calendared() {
		return fmt.Errorf("%s takes no calendar", r.Algorithm.Name)
	}
	return r.Span.check()
}

// appendSpan appends a Calendar rule's Span to dst.
func (r *Rule) appendSpan(dst []any) []any {
	if r.Calendar {
		for i := range r.Span {
			dst = append(dst, &r.Span[i])
		}
	}
	return dst
}
