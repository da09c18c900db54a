package native

import (
	"slices"
	"strconv"
	"strings"

	"github.com/rlctl/rlctl/luahost"
)

// A key is held either by the store or by the host, never both. The store holds the keys
// its decisions wrote; a call it leaves to the Lua (see decide) first hands the host the
// keys of that call the store holds (give), and a decision that finds a key missing asks
// the host for it (adopt). A key moves as Redis would hold it for the Lua: the same
// string or hash fields, the same expiry instant, so that the Lua reads exactly what a
// decision in Go left, and the other way round.

// adopt moves key from the host into sh (whose lock is held) as a key of layout a, and
// returns it: nil and true when the host does not hold the key either; false when the
// host holds it in a form the store does not (another type, a field the layout does not
// have, a value no script of the layout writes), which stays on the host.
func (s *Store) adopt(sh *shard, key string, a alg, nowMs int64) (*entry, bool) {
	if !s.host.HasKey(key) {
		return nil, true
	}
	v, ok := s.host.TakeKey(key)
	if !ok {
		return nil, false
	}
	e, ok := entryOf(v, a)
	if !ok || s.add(sh, key, e, nowMs) != nil {
		s.host.PutKey(key, v)
		return nil, false
	}
	return e, true
}

// give moves the keys the store holds among keys to the host. Their shards' locks are
// held.
func (s *Store) give(keys []string, nowMs int64) {
	for _, key := range keys {
		sh := &s.shards[shardOf(key)]
		if e := sh.lookup(key, nowMs); e != nil {
			sh.del(key, e)
			s.host.PutKey(key, valueOf(e))
		}
	}
}

// valueOf is e as Redis holds it.
func valueOf(e *entry) luahost.Value {
	v := luahost.Value{ExpireAt: e.expireAt, Expires: e.expires}
	if e.alg == algGCRA {
		v.Str = luahost.FormatNumber(e.f[0])
		if e.has&2 != 0 {
			v.Str = strconv.FormatFloat(e.f[0], 'f', 0, 64) + ":" + strconv.FormatFloat(e.f[1], 'f', 0, 64)
		}
		return v
	}
	v.Hash = true
	if e.has&compact != 0 {
		v.Fields = []string{luahost.FormatNumber(e.f[0]), luahost.FormatNumber(e.f[1])}
		return v
	}
	for i, name := range fields[e.alg] {
		if e.has&(1<<i) != 0 {
			v.Fields = append(v.Fields, name, luahost.FormatNumber(e.f[i]))
		}
	}
	return v
}

// entryOf is v as an entry of layout a, or false when no script of the layout writes v.
func entryOf(v luahost.Value, a alg) (*entry, bool) {
	e := &entry{alg: a, expires: v.Expires, expireAt: v.ExpireAt}
	if a == algGCRA {
		if v.Hash {
			return nil, false
		}
		if t, r, ok := strings.Cut(v.Str, ":"); ok {
			tf, ok1 := wholeText(t)
			rf, ok2 := wholeText(r)
			if !ok1 || !ok2 || rf == 0 {
				return nil, false
			}
			e.f[0], e.f[1], e.has = tf, rf, 3
			return e, true
		}
		f, ok := numberText(v.Str)
		if !ok {
			return nil, false
		}
		e.f[0], e.has = f, 1
		return e, true
	}
	if !v.Hash {
		return nil, false
	}
	names := fields[a]
	if a == algFixedWindow && len(v.Fields) == 2 && !slices.Contains(names, v.Fields[0]) {
		// The compact form: one field named by the window, holding a count of at least 1.
		w, ok1 := numberText(v.Fields[0])
		n, ok2 := numberText(v.Fields[1])
		if !ok1 || !ok2 || n < 1 {
			return nil, false
		}
		e.set(0, w)
		e.set(1, n)
		e.has |= compact
		return e, true
	}
	for i := 0; i+1 < len(v.Fields); i += 2 {
		j := 0
		for j < len(names) && names[j] != v.Fields[i] {
			j++
		}
		if j == len(names) {
			return nil, false
		}
		f, ok := numberText(v.Fields[i+1])
		if !ok {
			return nil, false
		}
		e.set(j, f)
	}
	return e, true
}

// numberText parses s when it is exactly the text a script writes for a number.
func numberText(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || luahost.FormatNumber(f) != s {
		return 0, false
	}
	return f, true
}

// wholeText parses s when it is exactly string.format('%.0f', n) of a whole n >= 0.
func wholeText(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || strconv.FormatFloat(f, 'f', 0, 64) != s {
		return 0, false
	}
	return f, true
}
