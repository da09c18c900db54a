package algorithms

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/rlctl/rlctl/lua"
)

// Kind is the type of an algorithm parameter as a policy states it.
type Kind int

const (
	// Count is a whole number of at least Param.Min: a limit, a capacity, a burst.
	Count Kind = iota
	// Duration is a positive number of microseconds (policies write "250ms", "1m").
	Duration
	// Rate is a positive amount per positive period ("10/s"); it takes two wire slots,
	// the amount and the period in microseconds.
	Rate
	// Lease is a per-request identifier the engine supplies (concurrency leases); policies
	// never set it.
	Lease
)

// Param describes one parameter of an algorithm.
type Param struct {
	Name string // the attribute name in a policy, e.g. "limit"
	Kind Kind
	Doc  string // one line: what it means and its unit
	// Capacity marks the parameter that bounds one request's cost (a limit, capacity,
	// burst or max): a larger cost can never pass, and it is the limit the script reports.
	// It is the parameter the guarantee's Amount is (a plugin's when its amount is a plain
	// reference to a count parameter).
	Capacity bool
	// Zero marks a Count that may be 0. A built-in's capacity of 0 admits nothing: every
	// request of positive cost is then over it (denied with retry-after Never, writing
	// nothing) and a peek (cost 0) passes, charging nothing: envoyproxy/ratelimit's
	// requests_per_unit = 0. A plugin's parameter of kind "whole" (a burst of 0) means what
	// its Lua makes of it. Every other numeric wire value is at least 1
	// (see Min).
	Zero bool
	// Flag marks a Count that is a yes or no: a plugin's parameter of kind "flag", which a
	// rule writes as a bool (true, false, or a request's condition). Its wire value is 1
	// or 0 (Min 0, at most 1) and its Lua kind 'nat'.
	Flag bool
}

// Min is the smallest wire value the parameter takes: 0 for a Count marked Zero, else 1
// (a Rate's amount and period alike). Validate and the dispatcher's parsing of parameters
// (lua/dispatch.lua, by the kind the algorithm's Lua declares: see luaKind) hold every
// value to it.
func (p Param) Min() int64 {
	if (p.Zero || p.Flag) && p.Kind == Count {
		return 0
	}
	return 1
}

// luaKind is the kind the algorithm's Lua declares for each wire value of the parameter,
// in its params table: 'pos' for an integer of at least 1, 'nat' for one of at least 0
// (Min 0), 'str' for a lease; a Rate is two values.
func (p Param) luaKind() []string {
	switch {
	case p.Kind == Lease:
		return []string{"str"}
	case p.Kind == Rate:
		return []string{"pos", "pos"}
	case p.Min() == 0:
		return []string{"nat"}
	}
	return []string{"pos"}
}

// slots is the number of wire values the parameter occupies.
func (p Param) slots() int {
	if p.Kind == Rate {
		return 2
	}
	return 1
}

// Algorithm is one registered rate-limiting algorithm.
type Algorithm struct {
	Name     string   // the name policies use and the dispatcher keys on
	Doc      string   // one sentence
	Params   []Param  // in wire order
	Commands []string // the Redis commands its Lua may call
	Source   string   // the Lua chunk; it returns a table {params, check, commit[, refund, validate]}
	// File is where a plugin's Source was read from ("" for built-ins).
	File string
	// Guarantee is what the algorithm promises, as verify checks it.
	Guarantee Guarantee
	// Complexity is its worst case on Redis per call and per key, which validate holds
	// rules to a budget with.
	Complexity Complexity
	// MaxCost is the most one request may charge a rule of the algorithm (a plugin's
	// max_cost: 1 for a script written for one request at a time); 0 means up to the
	// capacity. The engine refuses a request that would charge more, validate a rule whose
	// cost can, and verify sends no more.
	MaxCost int64
	// Keys names the further keys a rule of the algorithm uses beside its own (a plugin's
	// keys): its Lua reaches each as subkey(key, name), key .. ":" .. name. The engine
	// renders such a rule's key inside a hash tag so they share its cluster slot, and
	// resets them with it.
	Keys []string
	// validate checks cross-parameter bounds on wire values; nil means none.
	validate func(w []int64) error
}

// WireLen is the number of wire values the algorithm's parameters take.
func (a *Algorithm) WireLen() int {
	n := 0
	for _, p := range a.Params {
		n += p.slots()
	}
	return n
}

// Validate reports whether wire parameters w are acceptable: every numeric value at least
// its parameter's Min and at most 2^53, and every product the Lua forms within 2^53. A
// Lease slot carries no number (the lease travels as a string, see Rule.Lease) and is not
// checked.
func (a *Algorithm) Validate(w []int64) error {
	if len(w) != a.WireLen() {
		return fmt.Errorf("%s takes %d parameter values, got %d", a.Name, a.WireLen(), len(w))
	}
	for i, v := range w {
		p, _ := a.paramAt(i)
		if p.Kind == Lease {
			continue
		}
		if least := p.Min(); v < least {
			if least == 1 {
				return fmt.Errorf("%s: parameter value %d must be positive, got %d", a.Name, i+1, v)
			}
			return fmt.Errorf("%s: parameter value %d must be at least %d, got %d", a.Name, i+1, least, v)
		}
		if v > MaxInt {
			return fmt.Errorf("%s: parameter value %d is above 2^53", a.Name, i+1)
		}
		if p.Flag && v > 1 {
			return fmt.Errorf("%s: parameter value %d (%s, a flag) must be 0 or 1, got %d", a.Name, i+1, p.Name, v)
		}
	}
	if a.validate != nil {
		return a.validate(w)
	}
	return nil
}

// paramAt returns the parameter wire slot i belongs to; ok is false past the last.
func (a *Algorithm) paramAt(i int) (p Param, ok bool) {
	for _, p := range a.Params {
		if i < p.slots() {
			return p, true
		}
		i -= p.slots()
	}
	return Param{}, false
}

// IsLeaseSlot reports whether wire slot i is a Lease parameter.
func (a *Algorithm) IsLeaseSlot(i int) bool {
	p, ok := a.paramAt(i)
	return ok && p.Kind == Lease
}

// CarriesDebt reports whether a rule of a may be charged past its limit (OpOwe): the
// built-ins whose state earns a debt back exactly, over time or window by window
// (fixed_window, token_bucket, leaky_bucket, gcra). sliding_window (whose estimate would
// weigh a debt settled late in a window as spread over it, and forget the rest), sliding_log,
// concurrency and plugins do not.
func (a *Algorithm) CarriesDebt() bool {
	return IsBuiltin(a) && slices.Contains([]string{"fixed_window", "token_bucket", "leaky_bucket", "gcra"}, a.Name)
}

// HasLease reports whether the algorithm takes a Lease parameter: its requests hold what
// they are granted until released (concurrency).
func (a *Algorithm) HasLease() bool {
	return slices.ContainsFunc(a.Params, func(p Param) bool { return p.Kind == Lease })
}

// MaxInt is 2^53, the largest integer every Lua number holds exactly.
const MaxInt = 1 << 53

// ErrRange reports parameters whose products do not fit the exact integer range.
var ErrRange = errors.New("parameters too large for exact arithmetic")

// productAtMost reports whether a*b <= limit without overflow.
func productAtMost(a, b, limit int64) bool {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return hi == 0 && lo <= uint64(limit)
}

func boundProduct(name string, i, j int, limit int64, what string) func(w []int64) error {
	return func(w []int64) error {
		if !productAtMost(w[i], w[j], limit) {
			return fmt.Errorf("%s: %w: %s must stay below %d", name, ErrRange, what, limit)
		}
		return nil
	}
}

var (
	countParam = func(name, doc string) Param { return Param{Name: name, Kind: Count, Doc: doc, Capacity: true} }
	// limitParam is a window's limit, which may be 0: a rule that admits nothing (see
	// Param.Zero).
	limitParam  = Param{Name: "limit", Kind: Count, Doc: "cost allowed per window (0 admits nothing)", Capacity: true, Zero: true}
	windowParam = Param{Name: "window", Kind: Duration, Doc: "the window length"}
	hashCmds    = []string{"HMGET", "HSET", "PEXPIRE", "DEL"}
	windowCmds  = []string{"HMGET", "HSET", "PEXPIRE"}
	zsetCmds    = []string{"ZCOUNT", "ZRANGE", "ZRANGEBYSCORE", "ZREMRANGEBYSCORE", "ZADD", "ZREM", "PEXPIRE"}
)

// builtin is the static table of built-in algorithms, in script order.
var builtin = []*Algorithm{
	{
		Name:     "fixed_window",
		Doc:      "At most limit per aligned window; allows up to 2x limit across a window boundary.",
		Params:   []Param{limitParam, windowParam},
		Commands: []string{"HGETALL", "HSET", "HINCRBY", "HLEN", "HDEL", "DEL", "PEXPIRE"},
		Guarantee: Guarantee{Shape: ShapeWindow, Terms: windowTerms(0, 1), Share: &Slots{Amount: 0, Rate: -1}, Bound: Ratio{2, 1},
			Why: "fixed_window lets a burst straddle a window boundary: up to limit at the end of one window and limit again at the start of the next; use sliding_log, sliding_window or gcra for a smooth limit"},
		// The worst call: a try whose field is not alone (HINCRBY, HLEN, HDEL), then the
		// check's HGETALL of the full form and a commit that opens a window (DEL of it,
		// HSET, PEXPIRE): 7 commands, 1 + 1 + 5 + 5 + 1 fields.
		Complexity: fixedWork(7, 13, KeyHash, 5, hashElementBytes),
	},
	{
		Name:      "sliding_log",
		Doc:       "At most limit in every window-long interval, exactly; memory grows with the requests in the window (one entry each, whatever its cost).",
		Params:    []Param{countParam("limit", "cost allowed per window"), windowParam},
		Commands:  zsetCmds,
		Guarantee: Guarantee{Shape: ShapeWindow, Terms: windowTerms(0, 1), Share: &Slots{Amount: 0, Rate: -1}},
		validate: func(w []int64) error {
			if w[0] > 1_000_000 {
				return fmt.Errorf("sliding_log: limit %d above 1000000 (the log may hold up to limit entries, one per request of cost 1); use sliding_window or token_bucket", w[0])
			}
			return nil
		},
		Complexity: Complexity{Of: slidingLogWork, Fix: "sliding_log keeps a sorted-set entry per request in the window, up to limit / (smallest cost) of them: use sliding_window, which keeps three counters per key (within 2× of exact), a smaller limit, or a cost whose smallest value is larger"},
	},
	{
		Name:     "sliding_window",
		Doc:      "The two-window weighted estimate: limit per window with O(1) memory.",
		Params:   []Param{limitParam, windowParam},
		Commands: windowCmds,
		Guarantee: Guarantee{Shape: ShapeWindow, Terms: windowTerms(0, 1), Share: &Slots{Amount: 0, Rate: -1}, Bound: Ratio{2, 1},
			Why: "sliding_window estimates the previous window's traffic as spread evenly, so traffic bunched at the end of a window gets up to 2×limit through in a window-long interval; use sliding_log where the limit must be exact"},
		validate:   boundProduct("sliding_window", 0, 1, MaxInt/4, "limit × window (µs)"),
		Complexity: fixedWork(4, 10, KeyHash, 5, hashElementBytes),
	},
	{
		Name: "token_bucket",
		Doc:  "A bucket of capacity tokens refilled at rate; a request takes cost tokens.",
		Params: []Param{
			countParam("capacity", "the bucket size: the largest burst"),
			{Name: "rate", Kind: Rate, Doc: "tokens added per period"},
		},
		Commands:   hashCmds,
		Guarantee:  Guarantee{Shape: ShapeRate, Terms: rateTerms(0, 1), Share: &Slots{Amount: 0, Rate: 1}},
		validate:   boundProduct("token_bucket", 0, 2, MaxInt/2, "capacity × period (µs)"),
		Complexity: fixedWork(3, 4, KeyHash, 2, hashElementBytes),
	},
	{
		Name: "leaky_bucket",
		Doc:  "A policing meter: requests fill a bucket of capacity that leaks at rate.",
		Params: []Param{
			countParam("capacity", "the bucket size: the largest burst"),
			{Name: "rate", Kind: Rate, Doc: "units leaked per period"},
		},
		Commands:   hashCmds,
		Guarantee:  Guarantee{Shape: ShapeRate, Terms: rateTerms(0, 1), Share: &Slots{Amount: 0, Rate: 1}},
		validate:   boundProduct("leaky_bucket", 0, 2, MaxInt/2, "capacity × period (µs)"),
		Complexity: fixedWork(3, 4, KeyHash, 2, hashElementBytes),
	},
	{
		Name: "gcra",
		Doc:  "Generic cell rate algorithm: rate with a burst, exact retry and reset.",
		Params: []Param{
			{Name: "rate", Kind: Rate, Doc: "cells emitted per period"},
			countParam("burst", "cells that may be taken at once"),
		},
		Commands: []string{"GET", "SET", "DEL"},
		Guarantee: Guarantee{Shape: ShapeRate, Terms: func(w []int64) (Terms, error) {
			return Terms{Amount: w[2], Rate: w[0], Period: w[1]}, nil
		}, Share: &Slots{Amount: 2, Rate: 0}},
		validate:   boundProduct("gcra", 2, 1, MaxInt/4, "burst × period (µs)"),
		Complexity: fixedWork(2, 2, KeyString, 1, tatBytes),
	},
	{
		Name: "concurrency",
		Doc:  "At most max requests in flight; leases expire after ttl unless released.",
		Params: []Param{
			countParam("max", "leases held at once"),
			{Name: "ttl", Kind: Duration, Doc: "how long an unreleased lease lives"},
			{Name: "lease", Kind: Lease, Doc: "the request's lease id (set by the engine)"},
		},
		Commands:   zsetCmds,
		Guarantee:  Guarantee{Shape: ShapeInFlight, Terms: windowTerms(0, 1), Share: &Slots{Amount: 0, Rate: -1}},
		Complexity: Complexity{Of: concurrencyWork, Fix: "concurrency keeps a sorted-set entry per lease held, up to max / (smallest cost) of them: lower max, or charge each request a larger constant cost"},
	},
}

func init() {
	for _, a := range builtin {
		a.Source = lua.Source(a.Name + ".lua")
	}
}

// Builtin returns the built-in algorithms in script order. The slice is shared: do not modify.
func Builtin() []*Algorithm { return builtin }

// Lookup returns the built-in algorithm with the given name.
func Lookup(name string) (*Algorithm, bool) {
	for _, a := range builtin {
		if a.Name == name {
			return a, true
		}
	}
	return nil, false
}
