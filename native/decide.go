package native

import (
	"math"

	"github.com/rlctl/rlctl/algorithms"
)

// decide decides c in Go and returns its reply, or false when the store leaves c to the
// Lua: an op other than a check, a partial admission, a delayed call, a refund or an owe
// (of algorithms that carry a debt), more than maxRules rules, a rule without a kernel (see kernelOf), a cost,
// grant, wait or instant the script would refuse, keys that repeat, a deadline, a key
// held by the host that does not import, or a key of another layout than its rule's.
// When it returns false it has changed nothing but where keys are held.
func (s *Store) decide(c *algorithms.Call) (algorithms.Reply, bool, error) {
	n := len(c.Rules)
	units := int64(1) // what each rule's cost is multiplied by: OpMost's grant
	switch c.Op {
	case algorithms.OpCheck:
	case algorithms.OpMost:
		if c.Units < 1 || c.Units > algorithms.MaxInt {
			return algorithms.Reply{}, false, nil
		}
		units = c.Units
	case algorithms.OpDelay:
		if c.MaxDelay < 0 || c.MaxDelay > algorithms.MaxInt {
			return algorithms.Reply{}, false, nil
		}
	case algorithms.OpRefund, algorithms.OpOwe:
	default:
		return algorithms.Reply{}, false, nil
	}
	if n == 0 || n > maxRules || c.Deadline != 0 || c.Skew < 0 || c.Skew > algorithms.MaxInt {
		return algorithms.Reply{}, false, nil
	}
	if c.Now < 0 && c.Now != algorithms.ServerTime || c.Now > algorithms.MaxInt {
		return algorithms.Reply{}, false, nil
	}
	var p pass
	p.rules = c.Rules
	var shs [maxRules]*shard
	for i := range c.Rules {
		r := &c.Rules[i]
		k, ok := kernelOf(r)
		if !ok || r.Cost < 0 || float64(r.Cost)*float64(units) > algorithms.MaxInt {
			return algorithms.Reply{}, false, nil
		}
		for j := range i {
			if c.Rules[j].Key == r.Key {
				return algorithms.Reply{}, false, nil
			}
		}
		if c.Op == algorithms.OpOwe && r.Cost > 0 && !k.carriesDebt() {
			return algorithms.Reply{}, false, nil // the script's error: its algorithm carries no debt
		}
		p.ks[i], shs[i] = k, &s.shards[shardOf(r.Key)]
	}
	t := s.clock.Now()
	server, nowMs := t.UnixMicro(), t.UnixMilli()
	now := c.Now
	if now == algorithms.ServerTime {
		now = server
	}
	set := s.lockShards(shs[:n])
	defer s.unlock(set)

	for i := range c.Rules {
		key, sh := c.Rules[i].Key, shs[i]
		e := sh.lookup(key, nowMs)
		if e == nil {
			var ok bool
			if e, ok = s.adopt(sh, key, p.ks[i].alg, nowMs); !ok {
				return algorithms.Reply{}, false, nil
			}
		}
		if e != nil && e.alg != p.ks[i].alg {
			return algorithms.Reply{}, false, nil
		}
		p.es[i] = e
	}

	fnow := float64(now)
	slack := float64(c.Skew)
	switch c.Op {
	case algorithms.OpRefund:
		for i := range c.Rules {
			if cost := c.Rules[i].Cost; cost > 0 && p.ks[i].refund(p.es[i], fnow, float64(cost), nowMs, slack) && p.es[i] != nil {
				shs[i].del(c.Rules[i].Key, p.es[i])
			}
		}
		return algorithms.Reply{Allowed: true, Now: now, Server: server}, true, nil
	case algorithms.OpOwe:
		return s.owe(c, &p, shs[:n], fnow, nowMs, slack, algorithms.Reply{Allowed: true, Now: now, Server: server})
	}
	allowed, decider := p.check(fnow, units)
	rep := algorithms.Reply{Now: now, Server: server}
	switch c.Op {
	case algorithms.OpMost:
		allowed, decider, rep.Granted = p.most(fnow, units, allowed, decider)
	case algorithms.OpDelay:
		allowed, decider, rep.Delay = p.delay(fnow, c.MaxDelay, allowed, decider)
		if rep.Delay > 0 {
			// A reservation: its writes are the state at now + the wait, kept that much
			// longer.
			slack += float64(rep.Delay)
		}
	}
	if allowed {
		var want uint
		for i := range c.Rules {
			if p.vs[i].ok && c.Rules[i].Cost > 0 {
				want |= 1 << i
			}
		}
		if err := s.addKeys(&p, shs[:n], want, nowMs); err != nil {
			return algorithms.Reply{}, true, err
		}
	}
	rep.Allowed, rep.Decider, rep.Rules = allowed, decider, make([]algorithms.RuleResult, n)
	for i := range c.Rules {
		v := &p.vs[i]
		if v.ok && c.Rules[i].Cost > 0 {
			if allowed {
				p.ks[i].commit(p.es[i], v, nowMs, slack)
			} else {
				// Not charged: the rule reports its key as a peek does.
				v.remaining, v.reset = v.peekRemaining, v.peekReset
			}
		}
		rep.Rules[i] = algorithms.RuleResult{Allowed: v.ok, Remaining: int64(v.remaining), RetryAfter: int64(v.retry), ResetAfter: int64(v.reset), Limit: int64(v.limit)}
	}
	return rep, true, nil
}

// addKeys adds an entry for every rule in want (bit i: rule i) whose key the store does
// not hold, before anything is written, so that a store at its cap refuses the call
// whole, as Redis refuses a script's write past maxmemory (ErrFull; nothing added stays).
// Room made for one may free another key of the call: its charge is forgotten with it,
// as if it had been evicted just after the call.
func (s *Store) addKeys(p *pass, shs []*shard, want uint, nowMs int64) error {
	var added uint
	for i := range p.rules {
		if want&(1<<i) == 0 || p.es[i] != nil {
			continue
		}
		e := &entry{alg: p.ks[i].alg}
		if err := s.add(shs[i], p.rules[i].Key, e, nowMs); err != nil {
			for j := range i {
				if added&(1<<j) != 0 {
					shs[j].del(p.rules[j].Key, p.es[j])
					p.es[j] = nil
				}
			}
			return err
		}
		p.es[i] = e
		added |= 1 << i
	}
	return nil
}

// pass is a call's rules as one decision sees them: their kernels, their keys' entries
// (nil: none) and the verdicts of the last check.
type pass struct {
	rules []algorithms.Rule
	ks    [maxRules]kernel
	es    [maxRules]*entry
	vs    [maxRules]verdict
}

// check checks every rule at now, each at its cost times units, as the dispatcher's
// check_rules does, and returns whether the call is allowed and the first enforcing rule
// that denies it (1-based; 0 when allowed).
func (p *pass) check(now float64, units int64) (bool, int) {
	allowed, decider := true, 0
	for i := range p.rules {
		p.vs[i] = p.ks[i].check(p.es[i], now, float64(p.rules[i].Cost*units))
		if !p.vs[i].ok && !p.rules[i].Shadow && allowed {
			allowed, decider = false, i+1
		}
	}
	return allowed, decider
}

// most is the dispatcher's most (a partial admission of up to units, checked at units):
// when an enforcing rule denies, the grant is what every denying rule's remaining holds of
// its cost per unit, at least one, checked again. It returns the call's verdict and the
// grant (0 when denied).
func (p *pass) most(now float64, units int64, allowed bool, decider int) (bool, int, int64) {
	if allowed {
		return true, 0, units
	}
	g := float64(units)
	for i := range p.rules {
		if per := p.rules[i].Cost; !p.vs[i].ok && !p.rules[i].Shadow && per > 0 {
			g = min(g, math.Floor(p.vs[i].remaining/float64(per)))
		}
	}
	if g < 1 {
		g = 1
	}
	if allowed, decider = p.check(now, int64(g)); !allowed {
		return false, decider, 0
	}
	return true, 0, int64(g)
}

// delay is the dispatcher's delay (a call that may wait up to wait µs for its slot): when
// enforcing rules deny it at now, each with a retry-after of at most wait, the rules are
// checked again at now + d, d the longest, and the call is allowed there when they all
// allow it, their reset-afters counted from now. It returns the call's verdict and d (0:
// allowed at once, -1: denied, the verdicts those at now).
func (p *pass) delay(now float64, wait int64, allowed bool, decider int) (bool, int, int64) {
	if allowed {
		return true, 0, 0
	}
	d := 0.0
	for i := range p.rules {
		if p.vs[i].ok || p.rules[i].Shadow {
			continue
		}
		retry := p.vs[i].retry
		if retry < 0 || retry > float64(wait) {
			return false, decider, -1
		}
		d = max(d, retry)
	}
	first := p.vs
	if ok, _ := p.check(now+d, 1); !ok {
		p.vs = first
		return false, decider, -1
	}
	for i := range p.rules {
		p.vs[i].reset += d
	}
	return true, 0, int64(d)
}
