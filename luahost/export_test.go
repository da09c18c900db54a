package luahost

import "fmt"

// CommandSpec returns the arity and key positions the host's command table
// gives name, as Redis's COMMAND INFO spells them.
func CommandSpec(name string) (arity, first, last, step int, ok bool) {
	c := findCommand(name)
	if c == nil {
		return 0, 0, 0, 0, false
	}
	return c.arity, c.first, c.last, c.step, true
}

// RedisCommands returns the Redis 7.0 command names the host knows of.
func RedisCommands() map[string]bool { return redisCommands }

// CheckMemory recounts every key's bytes and the eviction pool, and returns an error
// when the running count (MemoryUsage) or a key's pool slot disagrees with it.
func (h *Host) CheckMemory() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := &h.ks.mem
	var sum int64
	for k, e := range h.ks.m {
		if n := m.entryBytes(k, e); n != e.size {
			return fmt.Errorf("key %q: counted %d bytes, recounted %d", k, e.size, n)
		}
		sum += e.size
		if m.evicts() != (e.slot >= 0) || e.slot >= 0 && (int(e.slot) >= len(m.pool) || m.pool[e.slot] != k) {
			return fmt.Errorf("key %q: pool slot %d wrong (pool of %d)", k, e.slot, len(m.pool))
		}
	}
	if sum != m.used {
		return fmt.Errorf("keys hold %d bytes, the count says %d", sum, m.used)
	}
	if m.evicts() && len(m.pool) != len(h.ks.m) {
		return fmt.Errorf("pool of %d for %d keys", len(m.pool), len(h.ks.m))
	}
	return nil
}

// DenyOOM reports whether the host refuses name over the memory cap (Redis's
// "denyoom" flag).
func DenyOOM(name string) bool {
	c := findCommand(name)
	return c != nil && c.flags&flagDenyOOM != 0
}
