package native

import (
	"github.com/rlctl/rlctl/algorithms"
)

// decide decides c in Go and returns its reply, or false when the store leaves c to the
// Lua: an op other than a check, more than maxRules rules, a rule without a kernel (see
// kernelOf), a cost or instant the script would refuse, keys that repeat, a deadline, a
// key held by the host that does not import, or a key of another layout than its rule's.
// When it returns false it has changed nothing but where keys are held.
func (s *Store) decide(c *algorithms.Call) (algorithms.Reply, bool, error) {
	n := len(c.Rules)
	if c.Op != algorithms.OpCheck || n == 0 || n > maxRules || c.Deadline != 0 || c.Skew < 0 || c.Skew > algorithms.MaxInt {
		return algorithms.Reply{}, false, nil
	}
	if c.Now < 0 && c.Now != algorithms.ServerTime || c.Now > algorithms.MaxInt {
		return algorithms.Reply{}, false, nil
	}
	var ks [maxRules]kernel
	var shs [maxRules]*shard
	for i := range c.Rules {
		r := &c.Rules[i]
		k, ok := kernelOf(r)
		if !ok || r.Cost < 0 || r.Cost > algorithms.MaxInt {
			return algorithms.Reply{}, false, nil
		}
		for j := range i {
			if c.Rules[j].Key == r.Key {
				return algorithms.Reply{}, false, nil
			}
		}
		ks[i], shs[i] = k, &s.shards[shardOf(r.Key)]
	}
	t := s.clock.Now()
	server, nowMs := t.UnixMicro(), t.UnixMilli()
	now := c.Now
	if now == algorithms.ServerTime {
		now = server
	}
	set := s.lockShards(shs[:n])
	defer s.unlock(set)

	var es [maxRules]*entry
	for i := range c.Rules {
		key, sh := c.Rules[i].Key, shs[i]
		e := sh.lookup(key, nowMs)
		if e == nil {
			var ok bool
			if e, ok = s.adopt(sh, key, ks[i].alg, nowMs); !ok {
				return algorithms.Reply{}, false, nil
			}
		}
		if e != nil && e.alg != ks[i].alg {
			return algorithms.Reply{}, false, nil
		}
		es[i] = e
	}

	var vs [maxRules]verdict
	allowed, decider := true, 0
	fnow := float64(now)
	for i := range c.Rules {
		vs[i] = ks[i].check(es[i], fnow, float64(c.Rules[i].Cost))
		if !vs[i].ok && !c.Rules[i].Shadow && allowed {
			allowed, decider = false, i+1
		}
	}
	if allowed {
		// Every new key first, so that a store at its cap refuses the call before any
		// write, as Redis refuses a script's write past maxmemory. Room made for one may
		// free another key of the call: its charge is forgotten with it, as if it had been
		// evicted just after the call.
		var added uint
		for i := range c.Rules {
			if es[i] != nil || !vs[i].ok || c.Rules[i].Cost == 0 {
				continue
			}
			key := c.Rules[i].Key
			e := &entry{alg: ks[i].alg}
			if err := s.add(shs[i], key, e, nowMs); err != nil {
				for j := range i {
					if added&(1<<j) != 0 {
						shs[j].del(c.Rules[j].Key, es[j])
					}
				}
				return algorithms.Reply{}, true, err
			}
			es[i] = e
			added |= 1 << i
		}
	}
	rep := algorithms.Reply{Allowed: allowed, Decider: decider, Now: now, Server: server, Rules: make([]algorithms.RuleResult, n)}
	slack := float64(c.Skew)
	for i := range c.Rules {
		v := &vs[i]
		if v.ok && c.Rules[i].Cost > 0 {
			if allowed {
				ks[i].commit(es[i], v, nowMs, slack)
			} else {
				// Not charged: the rule reports its key as a peek does.
				v.remaining, v.reset = v.peekRemaining, v.peekReset
			}
		}
		rep.Rules[i] = algorithms.RuleResult{Allowed: v.ok, Remaining: int64(v.remaining), RetryAfter: int64(v.retry), ResetAfter: int64(v.reset), Limit: int64(v.limit)}
	}
	return rep, true, nil
}
