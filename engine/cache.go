package engine

import (
	"sync"
	"time"
)

// denyCache remembers enforcing rules that denied, until their retry-after, so a client
// hammering a denied key costs no backend call.
type denyCache struct {
	mu      sync.Mutex
	size    int
	entries map[string]denied
}

type denied struct {
	until  time.Time // the request's send time + retry-after: never later than the server's
	cost   int64
	result RuleResult
}

func newDenyCache(size int) *denyCache {
	return &denyCache{size: size, entries: make(map[string]denied)}
}

// store remembers r (denied at cost, for a request sent at sent).
func (c *denyCache) store(r RuleResult, cost int64, sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.size {
		for k, v := range c.entries { // drop expired entries, else an arbitrary one
			if !v.until.After(sent) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.size {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[r.Key] = denied{until: sent.Add(r.RetryAfter), cost: cost, result: r}
}

// lookup returns the remembered denial of one of rules' enforcing rules still in force at
// now for a cost at least the denied one, with its retry-after counted from now.
func (c *denyCache) lookup(rules []pending, now time.Time) (RuleResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range rules {
		if rules[i].call.Shadow {
			continue
		}
		d, ok := c.entries[rules[i].call.Key]
		if !ok {
			continue
		}
		if !d.until.After(now) {
			delete(c.entries, rules[i].call.Key)
			continue
		}
		if rules[i].call.Cost >= d.cost {
			r := d.result
			r.RetryAfter = d.until.Sub(now)
			return r, true
		}
	}
	return RuleResult{}, false
}

// forget drops the entry of key (Reset).
func (c *denyCache) forget(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.entries, key)
	c.mu.Unlock()
}
